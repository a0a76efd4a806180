"""Chat templates rendered by jinja2 as Hugging Face's apply_chat_template renders them: the
independent reference for Strata's native renderers (models/chat_template). Importing this
skips the test when jinja2 is missing."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

from strata_support import SOURCE_DIR, skip

try:
    import jinja2
    import jinja2.ext
    import jinja2.sandbox
except ImportError as e:
    skip(f"{e.name} is missing (pip install jinja2)")

TEMPLATES = SOURCE_DIR / "tests" / "fixtures" / "chat_templates"
TemplateError = jinja2.exceptions.TemplateError


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """transformers' tojson filter (chat_template_utils): json.dumps without ASCII escapes or sorting."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


def render(template: str, messages: list[dict], bos: str, eos: str, tools: list[dict] | None = None, **extra) -> str:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    kwargs = {"messages": messages, "add_generation_prompt": True, "bos_token": bos, "eos_token": eos}
    if tools:
        kwargs["tools"] = tools
    kwargs.update(extra)  # the template's own switches (Qwen3's enable_thinking)
    return env.from_string(template).render(**kwargs)


def with_template(model: Path, template_file: str, out: Path) -> Path:
    """A copy of `model` at `out` whose tokenizer.chat_template is the fixture `template_file`."""
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(model), str(out),
                    "--chat-template-file", str(TEMPLATES / template_file), "--force"],
                   check=True, capture_output=True)
    return out

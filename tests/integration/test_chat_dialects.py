#!/usr/bin/env python3
"""Plain conversations render as the model's own published template renders them, where one
family's templates differ (models/chat_template's ChatDialect, read from the GGUF's template):
Llama 3.0 (text trimmed), 3.1 and 3.2 (a dated system turn always; 3.2's date is today's),
Llama 2 (<<SYS>>, text stripped), Mistral v1, tekken (Nemo) and v7 (Small 3.2's [SYSTEM_PROMPT]),
DeepSeek-V3.1 (an empty think block after every assistant header). Each template rides on a copy
of stories260K, rendered by `strata serve`'s /apply-template and by jinja2 as Hugging Face's
apply_chat_template does. A conversation the template itself refuses (Mistral v1 and a system
prompt) is not compared; Mistral Small's default system prompt (when a conversation has none)
is not reproduced, so its conversations carry one."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from jinja_templates import TEMPLATES, TemplateError, render, with_template
from serve_support import Server
from strata_support import tiny_llama

DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
# template file -> (the bos and eos it is rendered with: "" where Strata adds BOS as a token)
TEMPLATE_FILES = {
    "llama-3-instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.1-instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.2-instruct.jinja": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama-2-chat.jinja": ("<s>", "</s>"),
    "mistral-7b-instruct-v0.1.jinja": ("<s>", "</s>"),
    "mistral-nemo-instruct.jinja": ("<s>", "</s>"),
    "mistral-small-3.2-instruct.jinja": ("<s>", "</s>"),
    "deepseek-v3.1.jinja": ("", DS_EOS),
}
SYSTEM = {"role": "system", "content": " You are terse.\nAnswer in one line. "}
# Text with whitespace at its ends, ASCII and not (U+00A0, U+3000), which trims and strips remove.
TURNS = [
    {"role": "user", "content": "  Name a colour. \n"},
    {"role": "assistant", "content": " Blue. "},
    {"role": "user", "content": "\u00a0Another?\u3000"},
]
CONVERSATIONS = {
    "one message": TURNS[:1],
    "a system prompt": [SYSTEM] + TURNS[:1],
    "earlier turns": TURNS,
    "a system prompt and earlier turns": [SYSTEM] + TURNS,
}


def main() -> None:
    stories = tiny_llama()
    with tempfile.TemporaryDirectory() as tmp:
        for file, (bos, eos) in TEMPLATE_FILES.items():
            template = (TEMPLATES / file).read_text()
            with Server(with_template(stories, file, Path(tmp) / "model.gguf")) as server:
                for name, messages in CONVERSATIONS.items():
                    if file.startswith("mistral-small") and messages[0]["role"] != "system":
                        continue
                    try:
                        want = render(template, messages, bos, eos)
                    except TemplateError as e:
                        print(f"skip: {file}, {name}: the template refuses it ({e})")
                        continue
                    status, _, got = server.request("POST", "/apply-template", {"messages": messages})
                    assert status == 200, (file, name, got)
                    if got["prompt"] != want:
                        sys.exit(f"{file}, {name}: strata rendered\n{got['prompt']!r}\nthe template renders\n{want!r}")
                    print(f"ok: {file}, {name}")


if __name__ == "__main__":
    main()

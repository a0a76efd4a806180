"""`strata chat --print-prompt --chat-template NAME` for the families whose models Strata runs
besides the default model's ChatML: each renders as the family's own Jinja template does when
jinja2 renders it (as Hugging Face's apply_chat_template), on conversations with and without a
system prompt and with earlier turns (Qwen3's with <think> reasoning, which its template drops
from turns before the last user message; DeepSeek-R1's, which drops every turn's). The templates
are tests/fixtures/chat_templates/. The BOS token is rendered empty: Strata adds it as a token when
it tokenizes the prompt (models/chat_prompt), not as text. Harmony's system message carries today's
date, which both sides take from the clock (a run across midnight can disagree once)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from jinja_templates import TEMPLATES, render
from strata_support import STRATA_BIN, default_model

MODEL = default_model()
ENV = dict(os.environ, STRATA_MODELS=str(MODEL.parent))
DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
# family -> (template, the eos_token it is rendered with)
FAMILIES = {"qwen3": ("qwen3.jinja", "</s>"), "gemma": ("gemma3.jinja", "</s>"), "phi3": ("phi3.jinja", "</s>"),
            "deepseek2": ("deepseek-v2-chat.jinja", DS_EOS), "deepseek-r1": ("deepseek-r1.jinja", DS_EOS),
            "harmony": ("openai-gpt-oss.jinja", "<|return|>")}
SYSTEM = "You are terse.\nAnswer in one line."
HISTORY = [
    {"role": "user", "content": "Name a colour. "},
    {"role": "assistant", "content": "<think>\nThe user wants one colour.\n</think>\n\nBlue."},
    {"role": "user", "content": "  Another?\n"},
    {"role": "assistant", "content": "Green."},
]


def strata(*args: str, stdin: str) -> str:
    r = subprocess.run([STRATA_BIN, "chat", "--print-prompt", *args], input=stdin.encode(), env=ENV,
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        sys.exit(f"strata chat {' '.join(args)} failed ({r.returncode}):\n{r.stderr.decode()}")
    return r.stdout.decode()


def main() -> None:
    message = "What is 2+2? Use {braces} and <tags>.\nTwo lines."
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "conversation.json")
        with open(saved, "w") as f:
            json.dump({"template": "chatml", "system": SYSTEM, "messages": HISTORY}, f)
        for name, (file, eos) in FAMILIES.items():
            template = (TEMPLATES / file).read_text()
            cases = [
                ("one message", [], []),
                ("a system prompt", ["--system", SYSTEM], [{"role": "system", "content": SYSTEM}]),
                ("earlier turns", ["--load", saved], [{"role": "system", "content": SYSTEM}] + HISTORY),
            ]
            for what, args, messages in cases:
                got = strata("--chat-template", name, *args, stdin=message + "\n")
                want = render(template, messages + [{"role": "user", "content": message}], "", eos)
                if got != want:
                    sys.exit(f"{name}, {what}: strata rendered\n{got!r}\nthe template renders\n{want!r}")
                print(f"ok: {name}, {what}: renders as {file} does")
        # --no-think: Qwen3's template with enable_thinking false.
        got = strata("--chat-template", "qwen3", "--no-think", stdin=message + "\n")
        want = render((TEMPLATES / "qwen3.jinja").read_text(), [{"role": "user", "content": message}], "", "</s>",
                      enable_thinking=False)
        if got != want:
            sys.exit(f"qwen3, --no-think: strata rendered\n{got!r}\nthe template renders\n{want!r}")
        print("ok: qwen3, --no-think: renders as qwen3.jinja does with enable_thinking false")


if __name__ == "__main__":
    main()

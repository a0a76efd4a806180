"""`strata chat` without a terminal: the prompt it renders equals the model's own Jinja chat
template rendered by jinja2 (what Hugging Face uses), and piped input is plain generation of
that prompt."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from strata_support import STRATA_BIN, default_model, skip

MODEL = default_model()
try:
    import jinja2
    import jinja2.sandbox
    from gguf import GGUFReader
except ImportError as e:
    skip(f"{e.name} is missing (pip install jinja2 gguf)")

ENV = dict(os.environ, STRATA_MODELS=str(MODEL.parent))
READER = GGUFReader(str(MODEL))


def gguf_string(reader: GGUFReader, key: str) -> str:
    field = reader.fields[key]
    return bytes(field.parts[field.data[0]]).decode()


def reference_render(reader: GGUFReader, messages: list[dict]) -> str:
    """The GGUF's chat template rendered as transformers' apply_chat_template does."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=["jinja2.ext.loopcontrols"])
    tokens = reader.fields["tokenizer.ggml.tokens"]

    def token(key: str) -> str:
        field = reader.fields[key]
        return bytes(tokens.parts[tokens.data[int(field.parts[field.data[0]][0])]]).decode()

    return env.from_string(gguf_string(reader, "tokenizer.chat_template")).render(
        messages=messages, add_generation_prompt=True,
        bos_token=token("tokenizer.ggml.bos_token_id"), eos_token=token("tokenizer.ggml.eos_token_id"))


def strata(*args: str, stdin: str) -> str:
    r = subprocess.run([STRATA_BIN, *args], input=stdin.encode(), env=ENV, capture_output=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"strata {' '.join(args)} failed ({r.returncode}):\n{r.stderr.decode()}")
    return r.stdout.decode()


def check_render(name: str, args: list[str], messages: list[dict], message: str) -> str:
    got = strata("chat", "--print-prompt", *args, stdin=message + "\n")
    want = reference_render(READER, messages + [{"role": "user", "content": message}])
    if got != want:
        sys.exit(f"{name}: strata rendered\n{got!r}\nthe template renders\n{want!r}")
    print(f"ok: {name} renders as the model's template does")
    return got


def main() -> None:
    # No system prompt: SmolLM2's template inserts its own.
    prompt = check_render("one message", [], [], "hi")
    system = "You are terse.\nAnswer in one line."
    check_render("a system prompt", ["--system", system], [{"role": "system", "content": system}],
                 "What is 2+2? Use {braces} and <tags>.\nTwo lines.")
    with tempfile.TemporaryDirectory() as tmp:
        saved = {"template": "chatml", "system": system, "messages": [
            {"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another?"}, {"role": "assistant", "content": "Green."}]}
        path = os.path.join(tmp, "conversation.json")
        with open(path, "w") as f:
            json.dump(saved, f)
        check_render("a loaded conversation", ["--load", path],
                     [{"role": "system", "content": system}] + saved["messages"], "And a third?")

    # Piped input: one message, the reply printed, as `strata generate` completes the prompt.
    chat = strata("chat", "--temp", "0", "-n", "16", stdin="hi\n")
    gen = json.loads(strata("generate", "--temp", "0", "-n", "16", "--stop", "<|im_end|>", "--json", "-p", prompt, stdin=""))
    if chat != gen["text"] + "\n":
        sys.exit(f"piped chat printed {chat!r}; generate of the rendered prompt gives {gen['text']!r}")
    print(f"ok: piped chat equals generate of the rendered prompt ({len(gen['tokens'])} tokens)")


if __name__ == "__main__":
    main()

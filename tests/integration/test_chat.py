"""`strata chat` on a terminal, driven through a pseudo-terminal with the default model and
greedy sampling: replies stream, Ctrl-C stops a reply and the session goes on, /reset
forgets, /save and /load carry a conversation to a new session, /stats reports, multi-line
input, history, and bad input leaves the session running."""
from __future__ import annotations

import atexit
import json
import os
import re
import select
import shutil
import tempfile
import time
from pathlib import Path

from chat_terminal import PROMPT, Terminal, fail
from strata_support import default_model

MODEL = default_model()
TMP = Path(tempfile.mkdtemp(prefix="strata_chat_"))
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
# History goes to $XDG_CACHE_HOME/strata; the model is found through $STRATA_MODELS.
ENV = {k: v for k, v in os.environ.items() if not k.startswith("LC_") and k != "LANG"}  # the "C" locale, as a bare shell has
ENV.update(STRATA_MODELS=str(MODEL.parent), XDG_CACHE_HOME=str(TMP / "cache"), TERM="xterm")


def Chat(*args: str) -> Terminal:  # noqa: N802 (a session, as the tests below say it)
    return Terminal(*args, env=ENV)


def stats_field(stats: str, name: str) -> str:
    m = re.search(rf"^{name}:\s*(.*)$", stats, re.M)
    if not m:
        fail(f"/stats has no '{name}:' line:\n{stats}")
    return m.group(1)


def main() -> None:
    first, second = "What is the capital of France?", "And of Germany?"
    a = Chat("-n", "24", "--show-plan")
    # On a terminal the placement is weighed for a turn's new tokens, not a prompt filling the context.
    if b"workload  prompt 512, generate 24," not in a.expect(b", generate 24,"):
        fail(f"the plan was not weighed for a turn of 512 tokens: {a.text()[-600:]!r}")

    reply1 = a.say(first)
    if "Paris" not in reply1:
        fail(f"the first reply is {reply1!r}")

    stats = a.command("/stats")
    for name in ("last reply", "prompt", "overall", "context", "template", "plan"):
        stats_field(stats, name)
    if not re.search(r"\d+ tokens in [\d.]+ s, [\d.]+ tokens/s", stats_field(stats, "last reply")):
        fail(f"/stats gives no tokens/s: {stats}")
    n_ctx = int(re.search(r"/ (\d+) tokens", stats_field(stats, "context")).group(1))
    context1 = int(stats_field(stats, "context").split()[0])  # the first turn's prompt and reply
    print(f"ok: /stats reports the fields (context of {n_ctx})")

    saved = TMP / "conversation.json"
    a.command(f"/save {saved}")
    conversation = json.loads(saved.read_text())
    if [m["role"] for m in conversation["messages"]] != ["user", "assistant"] or conversation["messages"][0]["content"] != first:
        fail(f"/save wrote {conversation}")

    # The next turn reuses the KV cache of the first (at most what the first turn held).
    reply2 = a.say(second)
    prompt = stats_field(a.command("/stats"), "prompt")
    total, cached, new = map(int, re.match(r"(\d+) tokens, (\d+) cached, (\d+) new", prompt).groups())
    if not 0 < cached <= context1 or cached + new != total:
        fail(f"the second turn reused too little of the first: {prompt}")
    print(f"ok: the second turn's prompt: {prompt}")

    a.command("/reset")
    reply_after_reset = a.say(second)

    # A fresh session answers the second message alone as the reset session did, and after
    # /load it answers as the original session did.
    b = Chat("-n", "24")
    reply_fresh = b.say(second)
    if reply_fresh != reply_after_reset:
        fail(f"after /reset the reply was {reply_after_reset!r}; a fresh session's is {reply_fresh!r}")
    print(f"ok: /reset forgets the conversation ({reply_fresh!r})")
    out = b.command(f"/load {saved}")
    if "error" in out:
        fail(f"/load failed: {out}")
    reply_loaded = b.say(second)
    if reply_loaded != reply2:
        fail(f"after /load the reply was {reply_loaded!r}; the original session's was {reply2!r}")
    print(f"ok: /load restores the conversation ({reply2!r})")

    # Started with --load, the placement is weighed for the saved conversation and a turn after
    # it: the first reply reads the conversation whole.
    d = Chat("-n", "24", "--show-plan", "--load", str(saved))
    planned = int(re.search(rb"workload  prompt (\d+), generate 24,", d.expect(b", generate 24,")).group(1))
    if d.say(second) != reply2:
        fail("started with --load, the reply differs from the original session's")
    total, cached, _ = map(int, re.match(r"(\d+) tokens, (\d+) cached, (\d+) new", stats_field(d.command("/stats"), "prompt")).groups())
    # The conversation alone is the first reply's prompt but for the new message and its wrapping.
    conversation_tokens = planned - 512
    if cached != 0 or not 0 < conversation_tokens < total or total - conversation_tokens > 24:
        fail(f"planned for a prompt of {planned} tokens; the first reply read {total} ({cached} cached)")
    d.leave(b"\x04")
    print(f"ok: --load plans for the conversation's {conversation_tokens} tokens and a turn of 512")

    # Bad files give an error and the session goes on.
    (TMP / "bad.json").write_text('{"messages": [{"role": "user", "content": 3}]}')
    for path, error in ((TMP / "missing.json", "cannot read"), (TMP / "bad.json", "not a string")):
        out = b.command(f"/load {path}")
        if f"error: " not in out or error not in out:
            fail(f"/load {path.name} printed {out!r}")
    if "cannot write" not in b.command("/save /nonexistent/dir/x.json"):
        fail("/save to a missing folder gave no error")
    if "unknown command" not in b.command("/frobnicate"):
        fail("an unknown command gave no error")
    if "/save FILE" not in b.command("/help"):
        fail("/help does not list /save")
    print("ok: bad files and commands give errors and the session goes on")

    # Multi-line messages: a trailing backslash, and a """ block.
    b.command("/reset")
    b.send(b"line one\\\r")
    b.expect(b"... ")
    b.command("line two")
    b.send(b'"""\r')
    b.expect(b"... ")
    b.send(b"alpha\r")
    b.expect(b"... ")
    b.command('beta"""')
    b.command(f"/save {saved}")
    users = [m["content"] for m in json.loads(saved.read_text())["messages"] if m["role"] == "user"]
    if users != ["line one\nline two", "alpha\nbeta"]:
        fail(f"multi-line messages were saved as {users}")
    print("ok: multi-line messages")
    # Characters beyond ASCII arrive whole, whatever locale the terminal's environment names.
    b.command("/reset")
    b.command("café 😀 你好")
    b.command(f"/save {saved}")
    users = [m["content"] for m in json.loads(saved.read_text())["messages"] if m["role"] == "user"]
    if users != ["café 😀 你好"]:
        fail(f"a message beyond ASCII was saved as {users}")
    print("ok: a message beyond ASCII")
    if b.leave(b"\x04") != 0:
        fail("Ctrl-D did not leave cleanly")
    a.command("/help")  # the first chat writes its history after the second one's lines
    if a.leave(b"/exit\r") != 0:
        fail("/exit did not leave cleanly")
    history = (TMP / "cache" / "strata" / "chat_history").read_text().replace("\\040", " ")  # libedit escapes blanks
    if first not in history or second not in history or "alpha" not in history or "/help" not in history:
        fail(f"the history file lacks the messages of both chats: {history[:300]!r}")
    print("ok: Ctrl-D and /exit leave; the history keeps both chats' lines")

    # A long reply streams: its text arrives in several reads while the turn goes on. Ctrl-C
    # stops it; the prompt comes back and the session goes on.
    c = Chat("-n", "400")
    story = b"Write a long story about a dragon who learns to bake bread.\r\n"
    c.send(story[:-1])
    reply_reads = 0  # reads of reply text, after the whole echo of the message
    while reply_reads < 3:
        echoed = story in c.text()
        if not select.select([c.fd], [], [], 30)[0]:
            fail("the long reply did not start")
        data = os.read(c.fd, 4096)
        c.reads.append((time.time(), data))
        reply_reads += echoed and bool(data.strip())
    if PROMPT in c.text():
        fail(f"the reply ended before it could be seen streaming: {c.text()!r}")
    print(f"ok: the reply streams ({reply_reads} reads while it goes on)")
    c.send(b"\x03", at_prompt=False)
    t0 = time.time()
    c.expect(PROMPT, 10)
    stopped_after = time.time() - t0
    stats = c.command("/stats")
    m = re.match(r"(\d+) tokens .*cancelled", stats_field(stats, "last reply"))
    if not m or int(m.group(1)) >= 400:
        fail(f"Ctrl-C did not stop the reply: {stats}")
    n_tokens = int(m.group(1))
    print(f"ok: Ctrl-C stopped the reply after {n_tokens} tokens; the prompt was back in {stopped_after:.2f} s")
    if not c.say("Say hello.").strip():
        fail("no reply after Ctrl-C")
    c.send(b"\x03")
    c.expect(b"Ctrl-C again")
    if c.leave(b"\x03") != 0:
        fail("a second Ctrl-C at the prompt did not leave")
    print("ok: the session went on after Ctrl-C; Ctrl-C twice at the prompt leaves")

    # Ctrl-C within the prompt's pass (a long message) drops the message, and /stats leaves
    # the cut pass out.
    # About 6800 tokens: a pass of seconds here, long beside the terminal's round trip anywhere.
    e = Chat("-n", "16", "--ctx", "8192")
    long_message = " ".join(f"word{i}" for i in range(1500))
    e.send(long_message.encode() + b"\r")
    e.expect(f"word1499\r\n".encode(), 60)  # the line is in: its pass has begun
    e.send(b"\x03", at_prompt=False)
    out = e.expect(PROMPT, 30).decode(errors="replace")
    if "the message is dropped" not in out:
        fail(f"Ctrl-C within the prompt's pass printed {out[-300:]!r}")
    if stats_field(e.command("/stats"), "last reply") != "none yet":
        fail("/stats counted a reply stopped within its prompt's pass")
    e.command(f"/save {saved}")
    if json.loads(saved.read_text())["messages"]:
        fail("a message stopped within its prompt's pass stayed in the conversation")
    e.leave(b"/exit\r")
    print("ok: Ctrl-C within the prompt's pass drops the message and is left out of /stats")

    # Ctrl-C while the model loads (here: while the first run measures the machine) leaves,
    # as it would outside a chat, instead of waiting for the first prompt.
    f = Terminal("-n", "16", env=dict(ENV, XDG_CACHE_HOME=str(TMP / "fresh_cache")), ready=None)
    f.expect(b"measuring this machine")
    code = f.leave(b"\x03", at_prompt=False)
    if code != 130 or PROMPT in f.text():
        fail(f"Ctrl-C while loading gave exit code {code}; the terminal shows {f.text()[-300:]!r}")
    print("ok: Ctrl-C while the model loads leaves (exit code 130)")

    # A conversation past the context goes on without its oldest exchanges, saying so; a message
    # that alone is past it is refused with the way out, and the session goes on.
    d = Chat("-n", "16", "-c", "96")
    outs = [d.command(q) for q in ("Hi", "What is the capital of France?", "And of Spain?", "And of Italy?")]
    if not any("older messages are left out of the context" in out for out in outs):
        fail(f"a conversation past the context of 96 gave {outs!r}")
    if "older ones left out" not in stats_field(d.command("/stats"), "context"):
        fail("/stats does not say older messages were left out")
    out = d.command("Tell me about the history of the Roman empire in some detail please, with dates and names. " * 4)
    if "error: the message is" not in out or "the context holds 96" not in out or "--ctx" not in out:
        fail(f"a message past the context gave {out!r}")
    d.say("Hi")  # the session goes on
    d.leave(b"/exit\r")
    print("ok: a conversation past the context leaves its oldest exchanges out; a message past it is refused")

    # Lines pasted at once are one message: one reply, two messages in the conversation.
    p = Chat("-n", "8")
    p.send(b"Name a colour.\nJust one word, please.\n")
    pasted = p.expect(PROMPT).replace(b"\r\n", b"\n").decode(errors="replace")
    if "... Just one word" not in pasted or "(2 messages" not in stats_field(p.command("/stats"), "context"):
        fail(f"two pasted lines gave {pasted!r}")
    p.leave(b"/exit\r")
    print("ok: two lines pasted at once are one message")


if __name__ == "__main__":
    main()

"""`strata chat` suspended with Ctrl-Z at the prompt and brought back with `fg`, twice within one
line, under a job-control shell (bash on a pseudo-terminal, its own line editing off so that the
terminal's mode while stopped is what strata left): stopped, the terminal is in its ordinary
(canonical) mode; continued, the line editor has it again and the line typed before, across both
stops, is the message. The line editor's own handler covers only the first stop of a line."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import shutil
import struct
import tempfile
import termios
import time
from pathlib import Path

from chat_terminal import fail
from strata_support import STRATA_BIN, skip, tiny_llama

BASH = shutil.which("bash")
if not BASH:
    skip("bash is missing (the job-control shell this test stops and continues strata under)")
MODEL = tiny_llama()


class Shell:
    def __init__(self) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(BASH, [BASH, "--norc", "--noprofile", "--noediting", "-i"],
                      dict(os.environ, TERM="xterm", PS1="SHELL$ "))
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))
        self.out = b""

    def expect(self, pattern: bytes, timeout: float = 60) -> None:
        end = time.time() + timeout
        while pattern not in self.out:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, end - time.time()))
            if not ready:
                fail(f"no {pattern!r} after {timeout} s; the terminal shows {self.out[-400:]!r}")
            self.out += os.read(self.fd, 4096)

    def send(self, data: bytes) -> None:
        self.out = b""
        os.write(self.fd, data)

    def canonical(self) -> bool:
        return bool(termios.tcgetattr(self.fd)[3] & termios.ICANON)

    def await_editor(self, what: str) -> None:
        """Waits for the line editor to take the terminal out of canonical mode."""
        end = time.time() + 10
        while self.canonical():
            if time.time() > end:
                fail(f"the line editor did not take the terminal back {what}")
            time.sleep(0.01)


sh = Shell()
sh.expect(b"SHELL$ ")
sh.send(f"{STRATA_BIN} chat -m {MODEL} --temp 0 -n 8\r".encode())
sh.expect(b"> ")
sh.await_editor("at the first prompt")
for i, words in enumerate([b"Once", b" upon"], start=1):
    sh.send(words)
    time.sleep(0.2)  # the line editor has read the words before the stop comes
    sh.send(b"\x1a")
    sh.expect(b"SHELL$ ")
    if not sh.canonical():
        fail(f"stopped by Ctrl-Z number {i}, strata left the terminal in the line editor's mode")
    sh.send(b"fg\r")
    sh.await_editor(f"after fg number {i}")
sh.send(b" a time\r")
sh.expect(b"\r\n> ")
# The message is the whole line, typed across both stops.
with tempfile.TemporaryDirectory() as tmp:
    saved = Path(tmp) / "conversation.json"
    sh.send(f"/save {saved}\r".encode())
    sh.expect(b"\r\n> ")
    messages = json.loads(saved.read_text())["messages"]
    said = [m["content"] for m in messages if m["role"] == "user"]
    if said != ["Once upon a time"]:
        fail(f"the conversation's messages are {said!r}, not the line typed across the stops")
sh.send(b"/exit\r")
sh.expect(b"SHELL$ ")
os.write(sh.fd, b"exit\r")
print("ok: two Ctrl-Z stops within one line each left the terminal canonical, and fg gave the line editor it back")

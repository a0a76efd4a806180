"""`strata chat` suspended with Ctrl-Z at the prompt and brought back with `fg`, twice within one
line, under a job-control shell (bash on a pseudo-terminal): each time it is continued the line
editor has the terminal in its own mode again and draws the prompt and the line typed so far, and
the line typed across both stops is the message. The line editor's own handler covers only the
first stop of a line. (bash puts its own terminal mode back whenever a job stops, so the mode
strata leaves while stopped is not observable here.)"""
from __future__ import annotations

import fcntl
import json
import os
import pty
import shlex
import shutil
import signal
import struct
import tempfile
import termios
from pathlib import Path

from chat_terminal import Terminal, fail
from strata_support import STRATA_BIN, skip, tiny_llama

BASH = shutil.which("bash")
if not BASH:
    skip("bash is missing (the job-control shell this test stops and continues strata under)")
MODEL = tiny_llama()


class Shell(Terminal):
    """An interactive bash with job control on a pseudo-terminal, its own line editing off; typing
    at strata's prompt (send's at_prompt) waits for the line editor to have the terminal."""

    def __init__(self, home: Path) -> None:
        # Not Terminal's own, which starts strata itself. A home and cache of its own: the chat's
        # history and ~/.editrc stay the user's.
        env = dict(os.environ, TERM="xterm", PS1="SHELL$ ", HOME=str(home), XDG_CACHE_HOME=str(home / "cache"))
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(BASH, [BASH, "--norc", "--noprofile", "--noediting", "-i"], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))
        self.reads = []

    def close(self) -> None:
        """Ends bash and whatever it started (strata stopped or not)."""
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        pids = children.read_text().split() if children.exists() else []
        for pid in [*map(int, pids), self.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


with tempfile.TemporaryDirectory() as tmp:
    sh = Shell(Path(tmp))
    try:
        sh.expect(b"SHELL$ ")
        sh.send(f"{shlex.quote(STRATA_BIN)} chat -m {shlex.quote(str(MODEL))} --temp 0 -n 8\r".encode(), at_prompt=False)
        sh.expect(b"> ", 60)  # a fresh cache: the first run probes the machine
        typed = b""
        for words in [b"Once", b" upon"]:
            sh.send(words)  # fails unless the line editor has the terminal (after fg, again)
            sh.expect(words)  # echoed by the line editor: it has read them before the stop comes
            typed += words
            sh.send(b"\x1a", at_prompt=False)
            sh.expect(b"SHELL$ ")
            sh.send(b"fg\r", at_prompt=False)
            sh.expect(b"> " + typed, 10)  # the prompt and the line drawn again
        sh.send(b" a time\r")
        sh.expect(b"\r\n> ")
        saved = Path(tmp) / "conversation.json"
        sh.send(f"/save {shlex.quote(str(saved))}\r".encode())
        sh.expect(b"\r\n> ")
        said = [m["content"] for m in json.loads(saved.read_text())["messages"] if m["role"] == "user"]
        if said != ["Once upon a time"]:
            fail(f"the conversation's messages are {said!r}, not the line typed across the stops")
        sh.send(b"/exit\r")
        sh.expect(b"SHELL$ ")
    finally:
        sh.close()
print("ok: Ctrl-Z and fg twice within one line: the line editor had the terminal back and drew the line each time")

"""`strata chat` driven through a pseudo-terminal, as a person types at it: the chat tests'
sessions, and the web page's (a conversation carried between the page and the terminal)."""
from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time

from strata_support import STRATA_BIN

PROMPT = b"\r\n> "  # what follows each reply or command output


def fail(what: str) -> None:
    sys.exit(f"FAIL: {what}")


class Terminal:
    """One `strata chat` process on a pseudo-terminal, greedy, in the environment `env`."""

    def __init__(self, *args: str, env: dict | None = None, ready: bytes | None = b"> ") -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(STRATA_BIN, [STRATA_BIN, "chat", "--temp", "0", *args], env or dict(os.environ, TERM="xterm"))
        # Wide enough that the line editor does not wrap the messages it echoes.
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))
        self.reads: list[tuple[float, bytes]] = []  # (time, bytes) of each read since the last send
        if ready is not None:  # None: the caller awaits what it needs (what loading prints)
            self.expect(ready, 60)

    def expect(self, pattern: bytes, timeout: float = 30) -> bytes:
        """Reads until `pattern` appears; returns everything read since the last send."""
        end = time.time() + timeout
        while pattern not in self.text():
            left = end - time.time()
            if left <= 0:
                fail(f"no {pattern!r} after {timeout} s; the terminal shows {self.text()[-400:]!r}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:  # the child is gone
                    data = b""
                if not data:
                    fail(f"strata left while {pattern!r} was awaited: {self.text()[-400:]!r}")
                self.reads.append((time.time(), data))
        return self.text()

    def text(self) -> bytes:
        return b"".join(d for _, d in self.reads)

    def send(self, data: bytes, at_prompt: bool = True) -> None:
        """Types `data`; at the prompt, once the line editor has the terminal (keys typed
        before it has are seen by the terminal's line discipline instead)."""
        if at_prompt:
            deadline = time.time() + 10
            while termios.tcgetattr(self.fd)[3] & termios.ICANON:
                if time.time() > deadline:
                    fail("the line editor did not take the terminal")
                time.sleep(0.005)
        self.reads = []
        os.write(self.fd, data)

    def command(self, line: str) -> str:
        self.send(line.encode() + b"\r")
        out = self.expect(PROMPT)
        return out.replace(b"\r\n", b"\n").decode(errors="replace")

    def say(self, message: str) -> str:
        """Sends a one-line message; returns the reply as it was shown."""
        out = self.command(message)
        echo = message + "\n"
        if not out.startswith(echo):
            fail(f"the terminal did not echo {message!r}: {out[:200]!r}")
        return out[len(echo):-len("\n> ")]

    def leave(self, keys: bytes, at_prompt: bool = True) -> int:
        """Sends `keys`; returns the exit code once strata has left."""
        self.send(keys, at_prompt)
        deadline = time.time() + 10
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.reads.append((time.time(), os.read(self.fd, 4096)))
                except OSError:  # the terminal closes as strata leaves
                    pass
        os.kill(self.pid, 9)
        fail(f"strata did not leave after {keys!r}; the terminal shows {self.text()[-300:]!r}")

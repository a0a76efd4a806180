"""What several bench scripts share: Strata's cache folders, prompt filler, sizes, dropping the
page cache and a memory cgroup to hold an engine to a DRAM budget."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

PROG = Path(sys.argv[0]).stem  # names the running script in messages
DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
WORDS = ("river stone lamp orange quiet engine paper window garden signal copper violet market "
         "thunder pocket ladder winter coral basket meadow").split()


def log(msg: str) -> None:
    print(f"[{PROG} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def strata_bench_row(strata: str, model: str, args: list[str], test: str) -> dict | None:
    """The row of `strata bench -m MODEL ARGS --json` whose test starts with `test` ("pp", "tg"), or
    None where the engine refused the run (its error logged)."""
    run = subprocess.run([strata, "bench", "-m", model, *args, "--json"], capture_output=True, text=True)
    if run.returncode != 0:
        log(f"refused: {run.stderr.strip().splitlines()[-2:]}")
        return None
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    return next(r for r in rows if r["test"].startswith(test))


def sim_device_parser(doc: str, reps: int, rounds: int) -> argparse.ArgumentParser:
    """The options of a script that runs `strata bench` on the simulated device in rounds: the binary,
    the models (-m, repeatable), repetitions a run, rounds, the simulated link in GB/s."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default="build/strata")
    ap.add_argument("-m", "--model", action="append")
    ap.add_argument("-r", "--reps", type=int, default=reps)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--link", default="8")
    return ap


def cache_dir(*parts: str) -> str:
    """A folder under $XDG_CACHE_HOME/strata (else ~/.cache/strata), as scripts/ computes it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "strata", *parts)


def default_model() -> str:
    """The default model where scripts/fetch_model.sh puts it."""
    return os.path.join(os.environ.get("STRATA_MODELS") or cache_dir("models"), DEFAULT_MODEL)


def words(i: int, n: int) -> str:
    """n filler words, a different sequence for each i (prompts that share no prefix)."""
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(n))


def parse_size(text: str) -> int:
    """Bytes from '1234', '512M', '1.5G', '2GiB'."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)i?B?\s*", text, re.I)
    if not m:
        raise SystemExit(f"{PROG}: cannot read size '{text}'")
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()])


def drop_caches() -> bool:
    """Drop the page cache (root only), so the next run reads the model from disk."""
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError as e:
        log(f"cannot drop the page cache ({e}); figures are with a warm cache")
        return False


class Cgroup:
    """A cgroup v1 memory limit. It counts the page cache, so an engine that maps the model keeps
    at most `limit` bytes of it in memory."""

    ROOT = Path("/sys/fs/cgroup/memory")

    def __init__(self, limit: int):
        self.path = self.ROOT / f"strata-offload-{os.getpid()}"
        self.path.mkdir()
        self.set_limit(limit)

    def set_limit(self, limit: int) -> None:
        (self.path / "memory.limit_in_bytes").write_text(f"{limit}\n")
        self.limit = int((self.path / "memory.limit_in_bytes").read_text())  # rounded to pages

    def reset(self) -> None:
        for f in ("memory.max_usage_in_bytes", "memory.failcnt"):
            try:
                (self.path / f).write_text("0\n")
            except OSError:
                pass

    def peak(self) -> int:
        return int((self.path / "memory.max_usage_in_bytes").read_text())

    def failcnt(self) -> int:
        return int((self.path / "memory.failcnt").read_text())

    def wrap(self, cmd: list[str]) -> list[str]:
        """cmd run inside the cgroup: a shell joins it, then execs cmd."""
        return ["sh", "-c", f'echo $$ > "{self.path}/cgroup.procs" && exec "$@"', "sh", *cmd]

    def remove(self) -> None:
        for _ in range(20):  # the last member may take a moment to leave
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.5)
        log(f"could not remove {self.path}")

#!/usr/bin/env python3
"""`strata serve` refuses to start, naming the directory and the way out, when its KV spill
directory (--kv-spill) has no room for the part of the KV cache that does not fit the budget:
a 1 MiB tmpfs, so the test needs `mount` (root) and is skipped where it cannot mount one. The
same flags with a spill directory that has room start a server that spills there and answers,
so the refusal is the full directory's doing."""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from serve_support import Server
from strata_support import skip
from test_serve_faults import MODEL, ask, serve_fails

# Most of the 30 layers' KV cache (over 10 MiB) spills at a 512-token context under 56M.
SPILLING = ["--ctx", "512", "--dram", "56M"]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="strata-spill-") as d:
        roomy = Path(d) / "roomy"
        roomy.mkdir()
        with Server(MODEL, *SPILLING, "--kv-spill", str(roomy), "-v", threads=2) as server:
            assert f"layers spill to {roomy}" in server.stderr(), server.stderr()
            status, _, body = ask(server)
            assert status == 200, body
            assert server.stop() == 0, server.stderr()

        full = Path(d) / "spill"
        full.mkdir()
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(full)], capture_output=True, text=True)
        if mounted.returncode != 0:
            skip(f"cannot mount a 1 MiB tmpfs for the full spill directory: {mounted.stderr.strip()}")
        try:
            err = serve_fails(*SPILLING, "--kv-spill", str(full))
            assert str(full) in err and "No space left on device" in err and "--kv-spill" in err, err
        finally:
            subprocess.run(["umount", str(full)], check=False)
    print("ok: a full spill directory is refused at startup, naming it; one with room serves")


if __name__ == "__main__":
    main()

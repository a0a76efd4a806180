#!/usr/bin/env python3
"""`strata batch` killed with SIGKILL at random moments, again and again (while loading, while
generating, while writing), then run to the end: the output answers every input line exactly
once (each good custom_id once, one error record per bad line), has no partial line, and holds
the same greedy answers as an uninterrupted run. The random moments come from a seed printed
at the start (STRATA_KILL_SEED=N repeats a run)."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from test_batch import answers, batch_cmd, check_output, make_input, read_records

KILLS = 8


def check_whole(out: Path, reference: list[dict], good: set[str], bad: dict) -> None:
    """Every line answered exactly once, as the uninterrupted run answered it."""
    records = read_records(out)
    check_output(records, good, bad)
    assert answers(records) == answers(reference)


def main() -> None:
    seed = int(os.environ.get("STRATA_KILL_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        inp, ref, out = Path(tmp) / "in.jsonl", Path(tmp) / "ref.jsonl", Path(tmp) / "out.jsonl"
        good, bad = make_input(inp)
        t0 = time.time()
        fresh = subprocess.run(batch_cmd(inp, ref), capture_output=True, text=True, timeout=600)
        assert fresh.returncode == 0, fresh.stderr
        whole_s = time.time() - t0
        reference = read_records(ref)
        check_output(reference, good, bad)
        t0 = time.time()
        subprocess.run(batch_cmd(inp, ref), capture_output=True, timeout=600, check=True)  # nothing left: start-up only
        startup_s = time.time() - t0

        n_records = len(reference)
        killed, finished, counts = 0, 0, []
        for _ in range(4 * KILLS):
            if killed >= KILLS:
                break
            left = 1 - (counts[-1] if counts and out.exists() else 0) / n_records
            proc = subprocess.Popen(batch_cmd(inp, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0, startup_s + (whole_s - startup_s) * left))  # from start-up to about the end
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed += 1
            proc.wait()
            if proc.returncode == 0:  # it finished first: check it, and start over
                check_whole(out, reference, good, bad)
                out.unlink()
                finished += 1
                counts.append("done")
                continue
            if out.exists():
                text = out.read_text()
                if not text.endswith("\n"):  # a kill during a write may leave a partial last line: the next run drops it
                    text = text[:text.rfind("\n") + 1]
                records = [json.loads(line) for line in text.splitlines()]
                ids = Counter(r["custom_id"] for r in records if r["error"] is None)
                assert not ids or max(ids.values()) == 1, [k for k, n in ids.items() if n > 1]
                counts.append(len(records))
        assert killed >= KILLS, f"only {killed} runs were still going when killed (seed {seed})"
        final = subprocess.run(batch_cmd(inp, out), capture_output=True, text=True, timeout=600)
        assert final.returncode == 0, final.stderr
        check_whole(out, reference, good, bad)
    print(f"ok: killed {killed} times, {finished} runs finished first (records after each run: {counts}); "
          f"the output as an uninterrupted run's")


if __name__ == "__main__":
    main()

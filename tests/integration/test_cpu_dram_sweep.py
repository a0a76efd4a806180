#!/usr/bin/env python3
"""The CPU alone across DRAM budgets around the least that holds a run whose layers stream and
whose KV cache spills to disk: each run gives the all-in-memory run's greedy tokens or is refused
up front, and the refusal's parts add up to the budget it asks for. A budget that runs is never
followed by a larger one that is refused, and the budget the refusal asks for runs."""
from __future__ import annotations

import re
import subprocess

from strata_support import STRATA_BIN, default_model

GENERATE = ["generate", "-p", "Hello", "-n", "4", "--temp", "0", "--ctx", "800"]
# Half a MiB apart, from below the least that runs to where the KV cache is mostly in DRAM.
DRAM_MIB = [50 + 0.5 * i for i in range(21)]
PARTS = re.compile(r"take ([\d.]+) MiB, the KV cache with its spill buffers, activations and staging buffers ([\d.]+) MiB, "
                   r"and \d+ streaming buffers ([\d.]+) MiB")
HINT = re.compile(r"use --dram ([\d.]+) MiB or more")


def run(model, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([STRATA_BIN, *GENERATE, "-m", str(model), *flags], capture_output=True, text=True, timeout=120)


def main() -> None:
    model = default_model()
    full = run(model)
    assert full.returncode == 0, full.stderr
    ran_at, asked = [], set()
    for mib in DRAM_MIB:
        r = run(model, "--dram", f"{mib}M")
        if r.returncode == 0:
            assert r.stdout == full.stdout, f"--dram {mib}M: {r.stdout!r} where all in memory gave {full.stdout!r}"
            # The cache spilling its KV for the budget is the runtime's own doing, not a plan it failed to follow.
            assert "this runtime holds it in DRAM" not in r.stderr, f"--dram {mib}M:\n{r.stderr}"
            # A speculative pass's logits (--spec auto) are within the budget, held from the start.
            assert "running over the budget" not in r.stderr, f"--dram {mib}M:\n{r.stderr}"
            ran_at.append(mib)
            continue
        assert not ran_at, f"--dram {mib}M was refused after --dram {ran_at[-1]}M ran:\n{r.stderr}"
        parts, hint = PARTS.search(r.stderr), HINT.search(r.stderr)
        assert parts and hint and "requested by" not in r.stderr, f"--dram {mib}M:\n{r.stderr}"
        need = float(hint[1])
        assert need > mib, f"--dram {mib}M was refused, asking for {need} MiB"
        assert abs(sum(float(p) for p in parts.groups()) - need) <= 0.2, f"--dram {mib}M: the parts do not add up:\n{r.stderr}"
        asked.add(need)
    assert ran_at and len(ran_at) < len(DRAM_MIB), "the sweep should span budgets that run and budgets refused"
    for need in sorted(asked):
        r = run(model, "--dram", f"{need + 0.1:.1f}M")
        assert r.returncode == 0 and r.stdout == full.stdout, f"--dram {need + 0.1:.1f}M, as a refusal asked:\n{r.stderr}"
    print(f"ok: refused below {ran_at[0]} MiB asking for {sorted(asked)}, ran from there with the same tokens")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The simulated device with a small --gpu-mem across DRAM budgets from too small to ample: each
run either gives the CPU's greedy tokens or is refused by the planner up front, with a message
naming the budget. Never a run that plans, loads, and is then refused when the device backend
charges its pinned host staging or load buffer to DRAM: the plan counts those bytes."""
from __future__ import annotations

import subprocess

from strata_support import STRATA_BIN, default_model

GENERATE = ["generate", "-p", "Hello", "-n", "4", "--temp", "0", "--ctx", "512"]
# Every 5 MiB from too small to ample, and each MiB where the smallest runs begin.
DRAM_MIB = [*range(50, 135, 5), 61, 62, 63, 64]
# A small device (some layers and KV in DRAM) and one that holds the KV cache.
GPU_MEM = ("100M", "150M")
# Refusals made while planning, before loading: DRAM below the run's least, nothing fits the
# budgets, DRAM cannot stage layers read from NVMe, or the plan's resident layers do not fit.
PLANNER_REFUSALS = ("is too small", "no placement of", "cannot stage layers read from NVMe", "the plan keeps")


def run(model, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([STRATA_BIN, *GENERATE, "-m", str(model), *flags], capture_output=True, text=True, timeout=120)


def main() -> None:
    model = default_model()
    cpu = run(model, "--device", "cpu")
    assert cpu.returncode == 0, cpu.stderr
    ran = refused = 0
    for gpu_mem, mib in ((g, m) for g in GPU_MEM for m in DRAM_MIB):
        r = run(model, "--device", "sim", "--gpu-mem", gpu_mem, "--dram", f"{mib}M")
        if r.returncode == 0:
            assert r.stdout == cpu.stdout, f"--gpu-mem {gpu_mem} --dram {mib}M: {r.stdout!r} where the CPU gave {cpu.stdout!r}"
            ran += 1
            continue
        err = r.stderr
        # A budget exhausted at run time reads "DRAM budget N: M requested by <what>, F free".
        assert "requested by" not in err, f"--gpu-mem {gpu_mem} --dram {mib}M planned, then was refused at run time:\n{err}"
        assert any(s in err for s in PLANNER_REFUSALS) and "DRAM" in err and "hint:" in err, f"--gpu-mem {gpu_mem} --dram {mib}M:\n{err}"
        refused += 1
    # The sweep spans both ends: the smallest budgets cannot hold the run, the largest run it.
    assert ran > 0 and refused > 0, (ran, refused)
    print(f"ok: {ran} budgets ran with the CPU's tokens, {refused} refused by the planner")


if __name__ == "__main__":
    main()

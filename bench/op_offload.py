#!/usr/bin/env python3
"""Prefill with op offload on the simulated device: a prompt's pass with the plan's CPU layers copied
to the device and computed there (--op-offload on) against the same plan with them on the CPU
(--op-offload off), in alternating runs.

    python3 bench/op_offload.py [--strata build/strata] [-m MODEL ...] [--gpu-mem 25%,50%,80M]
                                      [-p N_PROMPT] [-r REPS] [--rounds K] [--link GBPS] [--flags "..."]

--gpu-mem takes shares of the model file or sizes. For each model and budget it runs
`strata bench --device sim --gpu-mem X -p N_PROMPT -n 0 --json --op-offload on|off` in turn, K
rounds, and prints the medians of the prompt rate, measured and predicted, both ways, with the
plan's CPU layers and the row count from which the planner would offload them (`auto`). --flags
adds strata flags to every run (a mixture of experts' --ot exps=dram keeps every expert on the
host, for the layers op offload copies in).
"""
from __future__ import annotations

import os
import shlex
import statistics

from common import default_model, log, sim_device_parser, strata_bench_row


def bench(strata: str, model: str, extra: list[str], n_prompt: int, reps: int) -> dict | None:
    """The pp row, or None where the engine refused the layout (its error logged)."""
    return strata_bench_row(strata, model, ["-p", str(n_prompt), "-n", "0", "-r", str(reps), *extra], "pp")


def budget(spec: str, model: str) -> str:
    """A share of the model file ("25%") as bytes, or a size as given."""
    if spec.endswith("%"):
        return str(max(1 << 20, os.path.getsize(model) * int(spec[:-1]) // 100))
    return spec


def main() -> None:
    ap = sim_device_parser(__doc__, reps=2, rounds=3)
    ap.add_argument("--gpu-mem", default="25%,50%")
    ap.add_argument("-p", "--n-prompt", type=int, default=512)
    ap.add_argument("--flags", default="", help="more strata flags for every run")
    a = ap.parse_args()
    columns = ["model", "--gpu-mem", "CPU layers", "planner offloads from", "off measured t/s", "off predicted",
               "on measured t/s", "on predicted", "on / off measured"]
    print("| " + " | ".join(columns) + " |")
    print("|---|---:|---|" + "---:|" * (len(columns) - 3))
    for model in a.model or [default_model()]:
        name = os.path.basename(model)
        for spec in a.gpu_mem.split(","):
            runs: dict[str, list] = {"off": [], "on": []}
            for k in range(a.rounds):
                for mode in ("off", "on"):
                    log(f"{name} {spec} op offload {mode}: round {k + 1}")
                    runs[mode].append(bench(a.strata, model, ["--device", "sim", "--gpu-mem", budget(spec, model),
                                                              "--sim-link", a.link, "--op-offload", mode,
                                                              *shlex.split(a.flags)],
                                            a.n_prompt, a.reps))
            if None in runs["off"] or None in runs["on"]:
                print(f"| {name} | {spec} | refused | | | | | | |", flush=True)
                continue
            med = {m: statistics.median(r["avg_ts"] for r in rs) for m, rs in runs.items()}
            pred = {m: statistics.median(r["predicted_ts"] for r in rs) for m, rs in runs.items()}
            info = runs["on"][-1].get("op_offload")
            layers = info["cpu_layers"] if info else "none"
            planner = (f"{info['planner_rows']} rows" if info["planner_rows"] else "never") if info else ""
            print(f"| {name} | {spec} | {layers} | {planner} | {med['off']:.1f} | {pred['off']:.1f} | {med['on']:.1f} "
                  f"| {pred['on']:.1f} | {med['on'] / med['off']:.2f} |", flush=True)


if __name__ == "__main__":
    main()

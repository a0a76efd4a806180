#!/usr/bin/env python3
"""Never slower than the CPU alone: the planner's choice on the simulated device at every share of
the model as --gpu-mem, against the CPU alone, measured in alternating runs.

    python3 bench/offload_choice.py [--strata build/strata] [-m MODEL ...] [--shares 10,25,50,75,100]
                                    [-n N_GEN] [-r REPS] [--rounds K] [--link GBPS]

For each model and share it runs `strata bench --device sim --gpu-mem SHARE --json -p 0 -n N_GEN`
(the device used as --device names it) and `strata bench --device cpu` in turn, K rounds, and
prints the medians: the device's plan measured and predicted, the CPU alone measured and predicted,
and the planner's choice (the device's plan where its prediction beats the CPU alone's, as
`--device auto` chooses) measured over the CPU alone's measurement.
"""
from __future__ import annotations

import os
import statistics

from common import default_model, log, sim_device_parser, strata_bench_row


def bench(strata: str, model: str, extra: list[str], n_gen: int, reps: int) -> dict | None:
    """The tg row, or None where the engine refused the layout (its error logged)."""
    return strata_bench_row(strata, model, ["-p", "0", "-n", str(n_gen), "-r", str(reps), *extra], "tg")


def main() -> None:
    ap = sim_device_parser(__doc__, reps=3, rounds=2)
    ap.add_argument("--shares", default="10,25,50,75,100")
    ap.add_argument("-n", "--n-gen", type=int, default=32)
    a = ap.parse_args()
    print("| model | --gpu-mem | device measured | device predicted | meas/pred | CPU alone measured | CPU predicted "
          "| choice | choice / CPU alone |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for model in a.model or [default_model()]:
        size = os.path.getsize(model)
        for share in (int(s) for s in a.shares.split(",")):
            gpu_mem = str(max(1 << 20, size * share // 100))
            dev, cpu = [], []
            for k in range(a.rounds):
                log(f"{os.path.basename(model)} {share}%: round {k + 1}")
                dev.append(bench(a.strata, model, ["--device", "sim", "--gpu-mem", gpu_mem, "--sim-link", a.link],
                                 a.n_gen, a.reps))
                cpu.append(bench(a.strata, model, ["--device", "cpu"], a.n_gen, a.reps))
            c_ts = statistics.median(r["avg_ts"] for r in cpu)
            c_pred = statistics.median(r["predicted_ts"] for r in cpu)
            name = os.path.basename(model)
            if None in dev:  # the device cannot hold the run: --device auto runs on the CPU alone
                print(f"| {name} | {share}% | refused | | | {c_ts:.1f} | {c_pred:.1f} | CPU alone | 1.00 |", flush=True)
                continue
            d_ts = statistics.median(r["avg_ts"] for r in dev)
            d_pred = statistics.median(r["predicted_ts"] for r in dev)
            weighed = dev[-1].get("weighed", {})
            device_wins = weighed and weighed["this_decode_ts"] > weighed["decode_ts"]
            choice, chosen_ts = ("device", d_ts) if device_wins else ("CPU alone", c_ts)
            print(f"| {name} | {share}% | {d_ts:.1f} | {d_pred:.1f} | {d_ts / d_pred:.2f} | {c_ts:.1f} "
                  f"| {c_pred:.1f} | {choice} | {chosen_ts / c_ts:.2f} |", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The planner's prediction against measured tokens/s on the simulated device, mode by mode.

    python3 bench/sim_prediction.py [--strata build/strata] [-m MODEL] [--link GBPS] [--gpu-mem SIZE]
                                    [-n N_GEN] [-r REPS] [--markdown]

For one model it writes a plan per mode, each a device plan edited from `strata plan --gpu
rtx4090` (only its layout is used: the runtime prices a given plan on this machine's simulated
device, from the cached `strata probe`), and runs `strata bench --device sim --plan FILE -p 0 -n
N_GEN` on it, which prints the measured decode tokens/s beside the plan's prediction:

  all-device       every layer's weights and KV cache on the device
  cpu-attention    weights on the device, the KV cache in DRAM, attention on the CPU (FastDecode/NEO)
  streamed         every layer's weights in DRAM, copied to the device each pass over the link
  half-streamed    the even layers on the device, the odd ones copied in each pass

Run `strata probe` first (it measures the simulated device's rates) on a quiet machine.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile

from common import default_model, log

HERE = os.path.dirname(os.path.abspath(__file__))


def base_plan(strata: str, model: str, workdir: str) -> dict:
    path = os.path.join(workdir, "base.json")
    subprocess.run([strata, "plan", "-m", model, "--gpu", "rtx4090", "-o", path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


def mode_plan(base: dict, mode: str) -> dict:
    p = copy.deepcopy(base)
    p["policy"]["recompute"] = False
    p["policy"]["cpu_attention"] = mode == "cpu-attention"
    for layer in p["layers"]:
        streamed = mode == "streamed" or (mode == "half-streamed" and layer["layer"] % 2 == 1)
        layer["weights"] = "dram->gpu" if streamed else "gpu"
        layer["kv"] = "dram" if mode == "cpu-attention" else "gpu"
        layer["attention"] = "cpu" if mode == "cpu-attention" else "gpu"
    return p


def bench(args, plan_path: str) -> dict:
    cmd = [args.strata, "bench", "-m", args.model, "--device", "sim", "--gpu-mem", args.gpu_mem, "--sim-link",
           str(args.link), "--plan", plan_path, "-p", "0", "-n", str(args.n_gen), "-r", str(args.reps), "--json"]
    log(" ".join(cmd))
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return next(json.loads(line) for line in out.splitlines() if line.startswith("{"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=os.path.join(HERE, "..", "build", "strata"))
    ap.add_argument("-m", "--model", default=default_model())
    ap.add_argument("--link", type=float, default=2.0, help="the simulated link, GB/s each way (slow enough to bind)")
    ap.add_argument("--gpu-mem", default="2G")
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("--modes", default="all-device,cpu-attention,streamed,half-streamed")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(args.model):
        sys.exit(f"sim_prediction: no such model file: {args.model} (run scripts/fetch_model.sh)")

    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        base = base_plan(args.strata, args.model, workdir)
        for mode in args.modes.split(","):
            path = os.path.join(workdir, f"{mode}.json")
            with open(path, "w") as f:
                json.dump(mode_plan(base, mode), f)
            r = bench(args, path)
            rows.append((mode, r))

    name = os.path.basename(args.model)
    if args.markdown:
        print(f"| model | mode | link GB/s | measured t/s | predicted t/s | measured / predicted |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for mode, r in rows:
            print(f"| {name} | {mode} | {args.link:g} | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} | "
                  f"{r['predicted_ts']:.2f} | {r['avg_ts'] / r['predicted_ts']:.2f} |")
        return
    for mode, r in rows:
        print(f"{mode:<14} measured {r['avg_ts']:8.2f} ± {r['stddev_ts']:.2f} t/s  predicted {r['predicted_ts']:8.2f}  "
              f"ratio {r['avg_ts'] / r['predicted_ts']:.2f}")


if __name__ == "__main__":
    main()

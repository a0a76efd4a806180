#!/usr/bin/env python3
"""Expert offload: a mixture of experts 4x the DRAM budget, its routed experts read through the
expert cache, against llama.cpp's mmap under the same memory limit.

Run as root from the repository root (it drops the page cache and makes a memory cgroup):

    python3 bench/expert_offload.py --model /work/bench-models/qwen3-30b-a3b-Q4_K.gguf \\
        --strata build/strata -n 64 -r 3 --markdown /tmp/expert_offload.md

The budget is a quarter of the model file (--dram to change it). In one run, each test after
`sync; echo 3 > /proc/sys/vm/drop_caches`, every engine inside a cgroup v1 memory limit of the
budget (bench/common.py's Cgroup, as bench/offload.py does; it counts the page cache, so an
engine that maps the model keeps at most that much of it):
  1. strata, no routing statistics: `strata bench -p 0 -n N -r R --json --dram BUDGET-SLACK`
     (--slack, default 256M, under the limit for the binary, libraries and allocator slack the
     budget does not count); the statistics file beside the model (MODEL.routing.json) is moved aside for the
     run and put back at the end, and XDG_CACHE_HOME points at a fresh folder.
  2. the same with --expert-policy frequency and with --expert-policy lru (the default adaptive
     policy against each of the rules it chooses between, same routing).
  3. a warm-up that records routing statistics: `strata bench -p 512 -n 128 -r 1` with the same
     budget (bench writes MODEL.routing.json), then 1. again: the plan now preloads the experts
     those statistics say are hot and seeds the cache's frequencies.
  4. llama.cpp: `llama-bench -m MODEL -p 0 -n N -r R -t THREADS -lm mmap -o jsonl` (bench/compare.py's
     binary, from bench/build_llamacpp.sh).
  5. with --sim-device GPU_MEM, strata on the simulated device (`--device sim --gpu-mem GPU_MEM`, its
     default thread split, no -t), twice: every layer's attention and the KV cache on the device,
     each layer's feed-forward on the host with the experts read through the cache under the same
     --dram (`--override-tensor exps=nvme`: none on the device); then as the planner decides, the
     most chosen experts held in the device memory left when that predicts faster (experts on
     all three tiers). The simulated device's memory is the host's, so the cgroup's limit grows by
     GPU_MEM for these runs. Each row sets the measured rate beside the plan's prediction for
     that device, and the share of the chosen experts the device computed beside the plan's.
For each strata run: decode tokens/s (and the plan's prediction), the expert cache's hit rate (and the plan's expected one),
expert bytes read from disk per token (and the plan's), those bytes per second against the probed
disk read rate; the cgroup's peak usage and failcnt. Load average is recorded before each run.
A synthetic model's random router spreads tokens almost evenly over the experts, so routing
statistics help less there than on a trained model's skewed routing.

Options: --model FILE (required), --dram SIZE, --slack 256M, -n 64, -r 3, -t THREADS, --skip-peer, --skip-strata,
--peer-timeout SECONDS (the peer counts as not finishing after it), --sim-device GPU_MEM, --only-sim (the simulated
device's row alone), --json-out FILE, --markdown FILE.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Cgroup, drop_caches, log, parse_size
from compare import LLAMA_BENCH, peer_note, run_json

REPO = Path(__file__).resolve().parent.parent


def load1() -> float:
    return os.getloadavg()[0]


def in_cgroup(cg: Cgroup, cmd: list[str], env: dict, timeout: float | None = None) -> list[dict]:
    drop_caches()
    cg.reset()
    out = subprocess.run(cg.wrap(cmd), check=True, stdout=subprocess.PIPE, text=True, env=env, timeout=timeout).stdout
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for r in records:
        r["cgroup_peak_bytes"], r["cgroup_failcnt"], r["load1"] = cg.peak(), cg.failcnt(), load1()
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--strata", default=str(REPO / "build" / "strata"))
    ap.add_argument("--llama-bench", default=LLAMA_BENCH)
    ap.add_argument("--dram", help="the memory limit (default: a quarter of the model file)")
    ap.add_argument("--slack", default="256M", help="what strata's --dram leaves of the limit (default: %(default)s)")
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--skip-strata", action="store_true", help="the peer alone (a second run under a lock of its own)")
    ap.add_argument("--peer-timeout", type=float, help="seconds after which the peer counts as not finishing")
    ap.add_argument("--sim-device", metavar="GPU_MEM", help="also run strata on the simulated device with this --gpu-mem")
    ap.add_argument("--only-sim", action="store_true", help="run the simulated device's row alone (needs --sim-device)")
    ap.add_argument("--json-out")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    model = Path(a.model).resolve()
    limit = parse_size(a.dram) if a.dram else model.stat().st_size // 4
    slack = parse_size(a.slack)
    if a.only_sim and not a.sim_device:
        sys.exit("expert_offload: --only-sim needs --sim-device GPU_MEM")
    if slack >= limit:
        sys.exit(f"expert_offload: --slack {a.slack} leaves nothing of the {limit} byte limit")
    stats = model.with_suffix(".routing.json")
    aside = stats.with_suffix(".json.aside")
    work = Path(tempfile.mkdtemp(prefix="expert-offload-"))
    strata = str(work / "strata")
    shutil.copy2(a.strata, strata)  # a rebuild during the run cannot swap the engine
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"))
    subprocess.run([strata, "probe", "--disk-dir", str(model.parent)], check=True, env=env, stdout=subprocess.DEVNULL)
    if stats.exists():
        stats.rename(aside)
    cg = Cgroup(limit)
    results: dict[str, dict] = {}
    peer_failure = ""
    try:
        bench = [strata, "bench", "-m", str(model), "-p", "0", "-n", str(a.n_gen), "-r", str(a.reps), "-t", str(a.threads),
                 "--json", "--dram", str(limit - slack)]
        if a.sim_device and not a.skip_strata:
            cg.set_limit(limit + parse_size(a.sim_device))  # the simulated device's memory is the host's
            sim = [x for x in bench if x not in ("-t", str(a.threads))] + ["--device", "sim", "--gpu-mem", a.sim_device]
            for what, extra in (("attention there, experts on the host", ["--override-tensor", "exps=nvme"]),
                                ("attention and the hottest experts there, as planned", [])):
                log(f"strata, simulated device --gpu-mem {a.sim_device}: {what} (load {load1():.2f})")
                results[f"strata, sim device {a.sim_device}: {what}"] = in_cgroup(cg, sim + extra, env)[0]
                stats.unlink(missing_ok=True)
            cg.set_limit(limit)
        if not a.skip_strata and not a.only_sim:
            log(f"strata, uniform routing (load {load1():.2f})")
            results["strata, no routing statistics (adaptive policy)"] = in_cgroup(cg, bench, env)[0]
            for policy in ("frequency", "lru"):
                stats.unlink(missing_ok=True)  # the last run saved some: each policy starts without them
                log(f"strata, {policy}")
                results[f"strata, no statistics, {policy}"] = in_cgroup(cg, bench + ["--expert-policy", policy], env)[0]
            stats.unlink(missing_ok=True)
            log("strata warm-up: routing statistics")
            in_cgroup(cg, [strata, "bench", "-m", str(model), "-p", "512", "-n", "128", "-r", "1", "-t", str(a.threads), "--json",
                           "--dram", str(limit - slack)], env)
            log("strata with routing statistics")
            results["strata, routing statistics"] = in_cgroup(cg, bench, env)[0]
        if not a.skip_peer and not a.only_sim:
            log("llama.cpp mmap")
            t0 = time.time()
            try:
                peer = in_cgroup(cg, [a.llama_bench, "-m", str(model), "-p", "0", "-n", str(a.n_gen), "-r", str(a.reps),
                                      "-t", str(a.threads), "-lm", "mmap", "-o", "jsonl"], env, a.peer_timeout)
                results["llama.cpp mmap"] = peer[0]
                results["llama.cpp mmap"]["peer_note"] = peer_note(a.llama_bench, peer)
            except subprocess.TimeoutExpired:
                peer_failure = (f"llama.cpp mmap: no result after {a.peer_timeout:.0f} s (--peer-timeout) under the "
                                f"{limit / 2**30:.2f} GiB limit (cgroup failcnt {cg.failcnt()})")
            except subprocess.CalledProcessError as e:
                # A peer the memory limit kills is a result too: say so instead of losing the run.
                how = f"signal {-e.returncode}" if e.returncode < 0 else f"exit {e.returncode}"
                peer_failure = (f"llama.cpp mmap: ended by {how} after {time.time() - t0:.0f} s under the "
                                f"{limit / 2**30:.2f} GiB limit, no figure (cgroup failcnt {cg.failcnt()})")
    finally:
        cg.remove()
        stats.unlink(missing_ok=True)
        if aside.exists():
            aside.rename(stats)
        shutil.rmtree(work, ignore_errors=True)

    if a.json_out:
        Path(a.json_out).write_text(json.dumps(results, indent=1))
    peer_ts = results.get("llama.cpp mmap", {}).get("avg_ts")
    lines = [f"{model.name} ({model.stat().st_size / 2**30:.1f} GiB), memory limit {limit / 2**30:.2f} GiB "
             f"(strata --dram {(limit - slack) / 2**30:.2f} GiB), tg{a.n_gen}, {a.reps} reps, {a.threads} threads",
             "",
             "| run | tg t/s | plan's t/s | vs llama.cpp | expert hit rate (plan) | experts from disk per token (plan) | "
             "waiting for reads per token | disk GB/s / probed | chosen experts on the device (plan) | cgroup peak | load |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, r in results.items():
        ts = f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}"
        vs = f"{r['avg_ts'] / peer_ts:.2f}x" if peer_ts and name.startswith("strata") else "-"
        if "expert_hit_rate" in r:
            hit = f"{100 * r['expert_hit_rate']:.1f}% ({100 * r['predicted_expert_hit_rate']:.1f}%)"
            disk = (f"{r['expert_disk_bytes_per_token'] / 2**20:.1f} MiB "
                    f"({r['predicted_expert_disk_bytes_per_token'] / 2**20:.1f} MiB)")
            gbps = f"{r['streamed_gbps']:.2f} / {r['disk_read_gbps']:.2f}"
            wait = f"{r['expert_wait_ms_per_token']:.1f} ms"
        else:
            hit = disk = gbps = wait = "-"
        plan = f"{r['predicted_ts']:.2f} ({r['avg_ts'] / r['predicted_ts']:.2f}x)" if r.get("predicted_ts") else "-"
        device = (f"{100 * r['expert_device_share']:.1f}% ({100 * r['predicted_expert_device_share']:.1f}%)"
                  if "expert_device_share" in r else "-")
        lines.append(f"| {name} | {ts} | {plan} | {vs} | {hit} | {disk} | {wait} | {gbps} | {device} | {r['cgroup_peak_bytes'] / 2**30:.2f} GiB "
                     f"(failcnt {r['cgroup_failcnt']}) | {r['load1']:.2f} |")
    if "llama.cpp mmap" in results:
        lines += ["", results["llama.cpp mmap"]["peer_note"]]
    if peer_failure:
        lines += ["", peer_failure]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        Path(a.markdown).write_text(text)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()

#!/usr/bin/env python3
"""Memory tiers: decode a model at least 4x the DRAM budget, streamed from disk, against resident and llama.cpp.

Run as root from the repository root (it drops the page cache and makes a memory cgroup):

    python3 bench/offload.py --strata build/strata --runs 5 --peer-runs 3 -n 16 --markdown /tmp/offload.md

What it does, in this order:
 0. Model: `bench/make_synthetic_gguf.py --shape llama3-8b --type Q4_0` written to --workdir (default /tmp,
    about 3.9 GiB, deleted at the end unless --keep-model), or --model FILE. The DRAM budget is a quarter
    of the file (`--dram` in bytes, so the file is at least 4x the budget), or --dram. Every strata run
    runs from a private copy of --strata (a rebuild during the run cannot swap the engine) and
    gets XDG_CACHE_HOME pointed at a temporary folder, so the user's cached hardware profile is left
    alone; `strata probe --disk-dir <model folder>` runs once first and fills that cache, so the planner
    plans with a fresh profile.
 1. --runs rounds of, each after `sync; echo 3 > /proc/sys/vm/drop_caches`:
      a. `strata probe --json --no-cache --disk-dir <model folder>`: sequential O_DIRECT io_uring read GB/s
         (page cache bypassed) on the drive that holds the model;
      b. streamed:  `strata generate -m MODEL --dram BUDGET -c CTX -n N --temp 0 --ignore-eos -p PROMPT
         --json --trace T.json`;
      c. `strata probe` again (a. and c. bracket the streamed run; the disk is noisy);
      d. resident:  the same generate without --dram.
    The tokens of every streamed run must equal those of every resident run (the issue's "done when");
    the script exits 1 if they do not.
    Decode bytes: `memory.bytes_streamed` counts the streamed layers' bytes each time a layer is used,
    prefill and decode together. The prompt is one forward pass and decode is N-1 passes (the N-th token
    is sampled from the last pass), so decode bytes = bytes_streamed * (N-1)/N, and the bytes per token
    are bytes_streamed / N. That is checked against layers_streamed x the layers' 4 KiB-aligned extents
    read from the GGUF. Achieved GB/s = decode bytes / decode seconds (decode seconds = N /
    timings.decode_tokens_per_s), and the ratio divides it by the mean of the two probes of the same
    round. The bound on streamed tokens/s is that same probe GB/s / bytes per token. Strata's
    decode_tokens_per_s is N / decode seconds while decode runs N-1 passes, so it is N/(N-1) above
    the pass rate; the table shows both and compares passes/s with the bound.
    From each trace, over the decode passes: the fraction of time at least one layer read was in
    flight ("I/O busy"), and the fraction compute spent waiting for a layer.
 2. The peer, --peer-runs rounds of four llama-bench-shaped tg runs (`strata bench -p 0 -n PEER_N -r 1`
    and `bench/peer_llamacpp.py -p 0 -n PEER_N -r 1`, each with its own untimed warm-up, 2 threads),
    each after dropping the page cache:
      strata resident, llama.cpp resident (default load mode, which is mmap),
      strata --dram BUDGET and llama.cpp mmap, both inside a memory cgroup (v1, a child of
      /sys/fs/cgroup/memory) whose memory.limit_in_bytes is BUDGET: a `sh` wrapper writes its pid to
      cgroup.procs and execs the engine. The cgroup limit counts page cache, so llama.cpp's mmap'd
      weights can only keep BUDGET bytes in memory. The peak usage and failcnt of the cgroup are
      reported for each run.
 Load average (1 minute, /proc/loadavg) is recorded before every measurement.

Options: --model FILE, --dram SIZE (bytes or 512M/1.5G), --ctx 512, -n 16, --runs 5, --peer-runs 3,
--peer-n 16, --prefetch K, --disk-size SIZE (for strata probe), --skip-peer, --json-out FILE (every raw measurement), --markdown FILE
(the tables), --keep-model.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Cgroup, drop_caches, log, parse_size

REPO = Path(__file__).resolve().parent.parent
PROMPT = "The history of the printing press begins"
ALIGN = 4096  # storage::kDefaultDioAlign: streamed layers are read as 4 KiB-aligned supersets
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def load1() -> float:
    return os.getloadavg()[0]


def mib(b: float) -> str:
    return f"{b / 2**20:.1f} MiB"


def stats(xs: list[float]) -> tuple[float, float, float]:
    return (min(xs), statistics.median(xs), max(xs)) if xs else (math.nan, math.nan, math.nan)


def run(cmd: list[str], env: dict, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def json_line(out: str) -> dict:
    try:
        return json.loads(out)  # `strata probe --json` prints one indented object
    except json.JSONDecodeError:
        pass
    for line in reversed(out.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON in the output")


# ---------------------------------------------------------------- model facts


def layer_extents(model: Path) -> list[int]:
    """Each blk.N's 4 KiB-aligned [first tensor, last tensor end) extent, as WeightStore computes it."""
    from gguf import GGUFReader

    r = GGUFReader(str(model))
    size = model.stat().st_size
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for t in r.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if not m:
            continue
        il = int(m.group(1))
        lo[il] = min(lo.get(il, 1 << 62), t.data_offset)
        hi[il] = max(hi.get(il, 0), t.data_offset + int(t.n_bytes))
    out = []
    for il in sorted(lo):
        a = lo[il] // ALIGN * ALIGN
        b = -(-hi[il] // ALIGN) * ALIGN
        out.append(min(b - a, size - a))
    return out


def machine() -> str:
    try:
        txt = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return "?"
    f = dict(re.findall(r"^([^:]+):\s*(.*)$", txt, re.M))
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return (f"{f.get('Model name', '?')}, {f.get('CPU(s)', '?')} CPUs ({f.get('Core(s) per socket', '?')} cores per socket, "
            f"{f.get('Thread(s) per core', '?')} thread per core), hypervisor {f.get('Hypervisor vendor', 'none')}, "
            f"{mem / 2**30:.1f} GiB RAM")


# ---------------------------------------------------------------- trace


def trace_summary(path: Path, n_passes: int) -> dict:
    """Over the decode passes (every forward pass but the first): I/O busy and compute-wait fractions."""
    ev = json.loads(path.read_text())
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    xs = [e for e in ev if e.get("ph") == "X"]
    starts = sorted(e["ts"] for e in xs if e["name"] == "layer 0")
    layers = [e for e in xs if re.fullmatch(r"layer \d+", e["name"])]
    if len(starts) < 2 or not layers:
        return {}
    t0 = starts[1]
    t1 = max(e["ts"] + e["dur"] for e in layers)
    span = t1 - t0
    reads = sorted((max(e["ts"], t0), min(e["ts"] + e["dur"], t1)) for e in xs if re.fullmatch(r"weights \d+", e["name"]))
    busy, cur_a, cur_b = 0.0, None, None
    for a, b in reads:
        if b <= a:
            continue
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                busy += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        busy += cur_b - cur_a
    wait = sum(min(e["ts"] + e["dur"], t1) - max(e["ts"], t0) for e in xs
               if e["name"].startswith("wait weights") and e["ts"] + e["dur"] > t0)
    compute = sum(min(e["ts"] + e["dur"], t1) - max(e["ts"], t0) for e in layers if e["ts"] + e["dur"] > t0)
    return {"decode_span_s": span / 1e6, "io_busy_frac": busy / span, "io_busy_s": busy / 1e6,
            "wait_frac": wait / span, "layer_frac": compute / span, "passes": len(starts), "expected_passes": n_passes}


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strata", default=str(REPO / "build" / "strata"))
    ap.add_argument("--model", help="reuse this GGUF instead of making a synthetic one")
    ap.add_argument("--shape", default="llama3-8b")
    ap.add_argument("--type", default="Q4_0")
    ap.add_argument("--workdir", default="/tmp")
    ap.add_argument("--dram", help="DRAM budget (default: a quarter of the file, in bytes)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("-n", type=int, default=16, help="tokens generated per strata generate run")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--peer-runs", type=int, default=3)
    ap.add_argument("--peer-n", type=int, default=16)
    ap.add_argument("--prefetch", type=int)
    ap.add_argument("--disk-size", help="passed to strata probe --disk-size (default: strata's, 512M)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--keep-model", action="store_true")
    ap.add_argument("--json-out")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    if a.n < 2:
        raise SystemExit("offload: -n must be at least 2 (decode is n-1 passes)")

    tmp = Path(tempfile.mkdtemp(prefix="strata-offload-", dir=a.workdir))
    # Run a private copy: a rebuild of the build folder in the middle of the rounds must not change the engine.
    src = Path(a.strata).resolve()
    strata = str(tmp / "strata")
    shutil.copy2(src, strata)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))
    made_model = False
    model = None
    cg = None
    res: dict = {"machine": machine(), "strata": str(src), "runs": [], "peer": [],
                 "strata_sha256": hashlib.sha256(Path(strata).read_bytes()).hexdigest()[:12],
                 "strata_mtime": time.strftime("%Y-%m-%d %H:%M", time.localtime(src.stat().st_mtime))}
    try:
        res["git"] = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                                    capture_output=True, text=True).stdout.strip()
        # -------- model and budget
        if a.model:
            model = Path(a.model).resolve()
        else:
            model = Path(a.workdir) / f"strata-offload-{a.shape}-{a.type}.gguf"
            log(f"writing the synthetic {a.shape} {a.type} model to {model}")
            made_model = True
            subprocess.run([sys.executable, str(REPO / "bench" / "make_synthetic_gguf.py"), "--shape", a.shape,
                            "--type", a.type, "-o", str(model)], check=True)
        fsize = model.stat().st_size
        budget = parse_size(a.dram) if a.dram else fsize // 4
        extents = layer_extents(model)
        res.update(model=str(model), model_bytes=fsize, budget_requested=budget, layer_extents=extents)
        log(f"model {mib(fsize)}, {len(extents)} layers of {mib(statistics.median(extents))}; budget {mib(budget)} "
            f"(file / budget = {fsize / budget:.2f})")

        log("probing once so the planner has a fresh profile (temporary XDG_CACHE_HOME)")
        p = run([strata, "probe", "--disk-dir", str(model.parent)], env)
        if p.returncode != 0:
            raise SystemExit(f"offload: strata probe failed:\n{p.stderr}")

        def gen_cmd(dram: int | None, trace: Path | None, n: int) -> list[str]:
            c = [strata, "generate", "-m", str(model), "-c", str(a.ctx), "-n", str(n), "--temp", "0", "--ignore-eos",
                 "-t", str(a.threads), "-p", a.prompt, "--json"]
            if dram is not None:
                c += ["--dram", str(dram)]
                if a.prefetch is not None:
                    c += ["--prefetch", str(a.prefetch)]
            if trace is not None:
                c += ["--trace", str(trace)]
            return c

        # -------- smallest workable budget, if the asked one is refused
        p = run(gen_cmd(budget, None, 2), env)
        tries = 0
        while p.returncode != 0:
            m = re.search(r"use --dram ([\d.]+) (B|KiB|MiB|GiB|TiB) or more", p.stderr)
            if not m or tries > 5:
                raise SystemExit(f"offload: the streamed run failed:\n{p.stderr}")
            need = math.ceil((float(m.group(1)) + 0.1) * UNITS[m.group(2)])
            log(f"the engine refused --dram {budget}: {p.stderr.strip().splitlines()[-1]}")
            res.setdefault("refusals", []).append({"budget": budget, "stderr": p.stderr.strip(), "minimum": need})
            budget = need if tries == 0 else int(budget * 1.01) + (1 << 20)
            tries += 1
            p = run(gen_cmd(budget, None, 2), env)
        res["budget"] = budget
        log(f"budget {budget} bytes = {mib(budget)}; file / budget = {fsize / budget:.2f}")

        # -------- rounds: probe, streamed, resident
        ref_tokens = None
        mismatches = 0
        for i in range(a.runs):
            r: dict = {"probes": [], "probe_loads": []}

            def probe() -> None:
                drop_caches()
                r["probe_loads"].append(load1())
                p = run([strata, "probe", "--json", "--no-cache", "--disk-dir", str(model.parent)]
                        + (["--disk-size", a.disk_size] if a.disk_size else []), env)
                if p.returncode != 0:
                    raise SystemExit(f"offload: strata probe failed:\n{p.stderr}")
                r["probes"].append(json_line(p.stdout)["nvme"]["read_gbps"])

            probe()
            drop_caches()
            tr = tmp / f"trace-{i}.json"
            r["stream_load"] = load1()
            p = run(gen_cmd(budget, tr, a.n), env)
            if p.returncode != 0:
                raise SystemExit(f"offload: streamed run failed:\n{p.stderr}")
            s = json_line(p.stdout)
            probe()
            r["disk_gbps"] = statistics.mean(r["probes"])  # the probes just before and just after
            drop_caches()
            r["resident_load"] = load1()
            p = run(gen_cmd(None, None, a.n), env)
            if p.returncode != 0:
                raise SystemExit(f"offload: resident run failed:\n{p.stderr}")
            rr = json_line(p.stdout)

            n_tok = len(s["tokens"])
            passes = n_tok  # prompt in one pass + n-1 decode passes
            mem = s["memory"]
            per_token = mem["bytes_streamed"] / passes
            expect = sum(sorted(extents)[-mem["layers_streamed"]:]) if mem["layers_streamed"] else 0
            dec_s = n_tok / s["timings"]["decode_tokens_per_s"]
            dec_bytes = mem["bytes_streamed"] * (passes - 1) / passes
            r.update(
                tokens_streamed=s["tokens"], tokens_resident=rr["tokens"], prompt_tokens=s["prompt_tokens"],
                layers_streamed=mem["layers_streamed"], kv_layers_spilled=mem["kv_layers_spilled"],
                bytes_streamed=mem["bytes_streamed"], peak_rss_streamed=mem["peak_rss_bytes"],
                peak_rss_resident=rr["memory"]["peak_rss_bytes"], plan=s["plan"]["summary"],
                bytes_per_token=per_token, bytes_per_token_from_gguf=expect,
                decode_s=dec_s, decode_bytes=dec_bytes, achieved_gbps=dec_bytes / dec_s / 1e9,
                streamed_tps=s["timings"]["decode_tokens_per_s"], resident_tps=rr["timings"]["decode_tokens_per_s"],
                predicted_streamed_tps=s["plan"]["predicted"]["decode_tokens_per_s"],
            )
            r["ratio"] = r["achieved_gbps"] / r["disk_gbps"]
            r["bound_tps"] = r["disk_gbps"] * 1e9 / per_token
            # strata's decode tok/s is n / decode s, but decode runs n-1 forward passes: compare passes/s.
            r["streamed_passes_per_s"] = (passes - 1) / dec_s
            r["tps_vs_bound"] = r["streamed_passes_per_s"] / r["bound_tps"]
            r["trace"] = trace_summary(tr, passes)
            tr.unlink(missing_ok=True)
            if ref_tokens is None:
                ref_tokens = rr["tokens"]
            same = r["tokens_streamed"] == ref_tokens and r["tokens_resident"] == ref_tokens
            r["tokens_identical"] = same
            mismatches += not same
            res["runs"].append(r)
            log(f"round {i + 1}/{a.runs}: disk {r['disk_gbps']:.2f} GB/s, streamed {r['achieved_gbps']:.2f} GB/s "
                f"(ratio {r['ratio']:.2f}), {r['streamed_tps']:.3f} tok/s (bound {r['bound_tps']:.3f}), resident "
                f"{r['resident_tps']:.2f} tok/s, {r['layers_streamed']} layers streamed, I/O busy "
                f"{r['trace'].get('io_busy_frac', math.nan):.0%}, tokens {'identical' if same else 'DIFFER'}, "
                f"load {r['stream_load']:.2f}")
            if abs(per_token - expect) > 0.001 * max(expect, 1):
                log(f"warning: bytes per token {per_token:.0f} != layers_streamed x extents {expect}")

        # -------- peer
        if not a.skip_peer:
            try:
                cg = Cgroup(budget)
                res["cgroup"] = {"path": str(cg.path), "limit": cg.limit}
            except OSError as e:
                log(f"cannot make a memory cgroup ({e}): the constrained peer rows are skipped")
                res["cgroup_error"] = str(e)
            peer = [sys.executable, str(REPO / "bench" / "peer_llamacpp.py"), "-m", str(model), "-p", "0",
                    "-n", str(a.peer_n), "-r", "1", "-t", str(a.threads), "--json"]
            sb = [strata, "bench", "-m", str(model), "-p", "0", "-n", str(a.peer_n), "-r", "1", "-t", str(a.threads),
                  "--json"]
            configs = [("strata", "resident", sb, False), ("llama.cpp", "resident", peer, False)]
            # strata bench and the peer use n_ctx = max(16, p + n): the placement at that context.
            p = run([strata, "generate", "-m", str(model), "-c", str(max(16, a.peer_n)), "-n", "2", "--temp", "0",
                     "--dram", str(budget), "-p", a.prompt[:12], "--json"], env)
            if p.returncode == 0:
                res["peer_layers_streamed"] = json_line(p.stdout)["memory"]["layers_streamed"]
            if cg:
                configs += [("strata", "cgroup", sb + ["--dram", str(budget)], True), ("llama.cpp", "cgroup", peer, True)]
            for i in range(a.peer_runs):
                for eng, where, cmd, in_cg in configs:
                    drop_caches()
                    if in_cg:
                        cg.reset()
                    ld = load1()
                    t0 = time.time()
                    p = run(cg.wrap(cmd) if in_cg else cmd, env)
                    row = {"engine": eng, "where": where, "load": ld, "wall_s": time.time() - t0, "rc": p.returncode}
                    if p.returncode == 0:
                        row["tps"] = json_line(p.stdout)["avg_ts"]
                    else:
                        row["error"] = p.stderr.strip()[-2000:]
                    if in_cg:
                        row["cg_peak"] = cg.peak()
                        row["cg_failcnt"] = cg.failcnt()
                    res["peer"].append(row)
                    log(f"peer round {i + 1}/{a.peer_runs}: {eng} {where}: "
                        + (f"{row['tps']:.3f} tok/s" if "tps" in row else f"FAILED rc {p.returncode}")
                        + (f", cgroup peak {mib(row['cg_peak'])}, failcnt {row['cg_failcnt']}" if in_cg else "")
                        + f", load {ld:.2f}")

        res["tokens_identical"] = mismatches == 0
        md = markdown(res, a)
        print(md)
        if a.markdown:
            Path(a.markdown).write_text(md)
        return 0 if mismatches == 0 else 1
    finally:
        if a.json_out:
            Path(a.json_out).write_text(json.dumps(res, indent=1))
        if cg:
            cg.remove()
        shutil.rmtree(tmp, ignore_errors=True)
        if made_model and model and not a.keep_model:
            Path(model).unlink(missing_ok=True)
            log(f"deleted {model}")


def markdown(res: dict, a) -> str:
    runs = res["runs"]
    L: list[str] = []

    def row(name: str, xs: list[float], fmt: str, loads: list[float], note: str = "") -> None:
        lo, med, hi = stats(xs)
        L.append(f"| {name} | {fmt.format(lo)} | {fmt.format(med)} | {fmt.format(hi)} | {len(xs)} | "
                 f"{min(loads):.1f}-{max(loads):.1f} | {note} |")

    r0 = runs[0]
    L.append(f"Model {Path(res['model']).name}: {mib(res['model_bytes'])}, {len(res['layer_extents'])} layers of "
             f"{mib(statistics.median(res['layer_extents']))}. Budget `--dram {res['budget']}` = {mib(res['budget'])}; "
             f"the file is {res['model_bytes'] / res['budget']:.2f}x the budget. Plan: {r0['plan']}. "
             f"{r0['layers_streamed']} layers streamed, {r0['kv_layers_spilled']} KV layers spilled, "
             f"{mib(r0['bytes_per_token'])} streamed per token; peak RSS streamed "
             f"{mib(max(r['peak_rss_streamed'] for r in runs))}, resident {mib(max(r['peak_rss_resident'] for r in runs))}.")
    L.append(f"Engine: {res['strata']} (built {res['strata_mtime']}, sha256 {res['strata_sha256']}, tree {res.get('git', '?')}), "
             f"run from a private copy.")
    L.append(f"Tokens identical, resident vs streamed, in all {len(runs)} rounds (n = {len(r0['tokens_resident'])}): "
             f"**{'yes' if res['tokens_identical'] else 'NO'}**.")
    L.append("")
    L.append("| measure | min | median | max | runs | load (1 min) | note |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    pl = [x for r in runs for x in r["probe_loads"]]
    sl = [r["stream_load"] for r in runs]
    rl = [r["resident_load"] for r in runs]
    row("raw disk read, `strata probe` (GB/s)", [x for r in runs for x in r["probes"]], "{:.2f}", pl,
        "every probe: O_DIRECT io_uring, depth 32, 1 MiB requests, cache dropped")
    row("streamed bytes/s during decode (GB/s)", [r["achieved_gbps"] for r in runs], "{:.2f}", sl,
        "bytes_streamed x (n-1)/n / decode s")
    row("**achieved / raw** (target >= 0.8)", [r["ratio"] for r in runs], "{:.2f}", sl,
        "each round vs the mean of the probes just before and after it")
    row("resident decode (tok/s)", [r["resident_tps"] for r in runs], "{:.2f}", rl, "")
    row("streamed decode (tok/s)", [r["streamed_tps"] for r in runs], "{:.3f}", sl,
        f"strata's figure, n / decode s; planner predicted {statistics.median(r['predicted_streamed_tps'] for r in runs):.3f}")
    row("streamed decode, forward passes/s", [r["streamed_passes_per_s"] for r in runs], "{:.3f}", sl,
        "(n-1) / decode s")
    row("bound raw / bytes per token (tok/s)", [r["bound_tps"] for r in runs], "{:.3f}", sl, "raw as in the ratio")
    row("streamed passes/s / bound", [r["tps_vs_bound"] for r in runs], "{:.2f}", sl, "equals achieved / raw")
    tr = [r["trace"] for r in runs if r.get("trace")]
    if tr:
        row("decode time with a read in flight (trace)", [t["io_busy_frac"] * 100 for t in tr], "{:.0f}%", sl, "")
        row("decode time compute waits for a layer (trace)", [t["wait_frac"] * 100 for t in tr], "{:.0f}%", sl, "")
        row("disk GB/s while a read is in flight (trace)",
            [r["decode_bytes"] / r["trace"]["io_busy_s"] / 1e9 for r in runs if r.get("trace")], "{:.2f}", sl, "")
    if res["peer"]:
        L.append("")
        lim = res.get("cgroup", {}).get("limit")
        L.append(f"tg{a.peer_n} (`strata bench -p 0 -n {a.peer_n} -r 1` and `bench/peer_llamacpp.py -p 0 -n {a.peer_n} -r 1`), "
                 f"{a.threads} threads, context {max(16, a.peer_n)}, page cache dropped before each run; cgroup limit = "
                 f"{lim if lim else 'n/a'} bytes ({mib(lim) if lim else 'no cgroup'}). At this context strata streams "
                 f"{res.get('peer_layers_streamed', '?')} of {len(res['layer_extents'])} layers.")
        L.append("")
        L.append("| engine | memory | tg tok/s min | median | max | runs | cgroup peak (max) | cgroup failcnt (max) | load (1 min) |")
        L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        seen = []
        for p in res["peer"]:
            k = (p["engine"], p["where"])
            if k not in seen:
                seen.append(k)
        for eng, where in seen:
            ps = [p for p in res["peer"] if p["engine"] == eng and p["where"] == where]
            ok = [p["tps"] for p in ps if "tps" in p]
            lo, med, hi = stats(ok)
            desc = ("no limit, all weights in DRAM" if where == "resident" else
                    (f"`--dram {res['budget']}` in the cgroup" if eng == "strata" else "default mmap in the cgroup"))
            peak = max((p.get("cg_peak", 0) for p in ps), default=0)
            fc = max((p.get("cg_failcnt", 0) for p in ps), default=0)
            fails = len(ps) - len(ok)
            L.append(f"| {eng} | {desc} | {lo:.3f} | {med:.3f} | {hi:.3f} | {len(ok)}{f' ({fails} failed)' if fails else ''} | "
                     f"{mib(peak) if where == 'cgroup' else '-'} | {fc if where == 'cgroup' else '-'} | "
                     f"{min(p['load'] for p in ps):.1f}-{max(p['load'] for p in ps):.1f} |")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())

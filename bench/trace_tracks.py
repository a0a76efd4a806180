#!/usr/bin/env python3
"""Where a `--trace` file's time went: for each track and slice name, how many slices, their total
and median milliseconds, and each track's share of the trace's span, as a Markdown table (the
largest totals first). Reads .json or .json.gz; a layer's slices ("layer 12 ...") count under one
name with the number dropped.

    python3 bench/trace_tracks.py TRACE [--top N]
"""
from __future__ import annotations

import argparse
import collections
import gzip
import json
import re
import statistics
from pathlib import Path


def load(path: Path) -> list[dict]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    ev = json.loads(raw)
    return ev["traceEvents"] if isinstance(ev, dict) else ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--top", type=int, default=20, help="rows to print (default 20)")
    a = ap.parse_args()
    ev = load(a.trace)
    tracks = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
    slices = [e for e in ev if e.get("ph") == "X"]
    if not slices:
        print(f"{a.trace}: no slices")
        return
    span = max(e["ts"] + e["dur"] for e in slices) - min(e["ts"] for e in slices)
    by_name: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    by_track: dict[str, float] = collections.defaultdict(float)
    for e in slices:
        track = tracks.get(e["tid"], str(e["tid"]))
        by_name[(track, re.sub(r"\d+", "N", e["name"]))].append(e["dur"] / 1e3)
        by_track[track] += e["dur"] / 1e3
    print(f"{a.trace.name}: {len(slices)} slices over {span / 1e3:.1f} ms\n")
    print("| track | slice | n | total ms | median ms | track's total / span |")
    print("|---|---|---:|---:|---:|---:|")
    rows = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[: a.top]
    for (track, name), durs in rows:
        print(f"| {track} | {name} | {len(durs)} | {sum(durs):.2f} | {statistics.median(durs):.3f} | "
              f"{by_track[track] / (span / 1e3):.2f} |")


if __name__ == "__main__":
    main()

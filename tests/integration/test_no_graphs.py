#!/usr/bin/env python3
"""`--no-graphs`: a device's decode steps launched op by op give the tokens the captured graphs
give, and `--trace` shows it: the graphs' run has "graph" slices on the device's compute track
(one per step launched whole), the op-by-op run none, only the ops. The plan holds every layer
and the KV cache on the device, as decode steps are captured only then: an H200's plan (the
catalog's), run on the simulated device."""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from strata_support import STRATA_BIN, default_model

RUN = ["-p", "Once upon a time", "-n", "12", "--temp", "0", "--device", "sim"]


def generate(model: Path, plan: Path, trace: Path, *extra: str) -> tuple[str, list[str]]:
    out = subprocess.run([STRATA_BIN, "generate", "-m", str(model), "--plan", str(plan), *RUN, "--trace", str(trace), *extra],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    return out.stdout, [e["name"] for e in events if e.get("ph") == "X"]


def main() -> None:
    model = default_model()
    with tempfile.TemporaryDirectory() as tmp:
        plan = Path(tmp) / "plan.json"
        made = subprocess.run([STRATA_BIN, "plan", "-m", str(model), "--gpu", "h200", "-o", str(plan)],
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        layers = json.loads(plan.read_text())["layers"]
        assert all(l["weights"] == "gpu" and l["kv"] == "gpu" for l in layers), layers
        graphs_text, graphs_slices = generate(model, plan, Path(tmp) / "graphs.json")
        ops_text, ops_slices = generate(model, plan, Path(tmp) / "ops.json", "--no-graphs")
    assert graphs_text == ops_text, (graphs_text, ops_text)
    assert graphs_slices.count("graph") >= 8, f"{graphs_slices.count('graph')} graph launches in 12 tokens"
    assert "graph" not in ops_slices, "--no-graphs still launched a graph"
    assert any("attention" in s for s in ops_slices), sorted(set(ops_slices))
    print(f"ok: the same text; {graphs_slices.count('graph')} graph launches, none with --no-graphs")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""`strata plan -m MODEL --dram X -o FILE` on this machine makes a plan the runtime runs at X:
from the least budget to one that holds every layer, the command the plan prints runs it and
gives the all-in-memory run's greedy tokens. Below the least, plan and generate (at the plan's
context) both refuse and name the same least budget, within the plan's bisection. A plan with a
GPU (this machine with an H200 beside it) counts the device backend's host buffers: where they
take a budget the CPU alone runs in, `plan` falls back to the CPU alone and names the device's
least, the runtime refuses the device plan below it and names the same, and from it the plan
runs on the simulated device with the same tokens. A plan that keeps the KV cache on the device
beside layers left to the CPU runs from the least generate names for it."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from strata_support import STRATA_BIN, default_model

RUN = ["-p", "Hello", "-n", "4", "--temp", "0"]
CTX = 640  # the plan's default workload: a prompt of 512 and 128 generated
COMMAND = re.compile(r"to run by this plan: strata (generate .*)")
PLAN_FITS = re.compile(r"--dram ([\d.]+) MiB fits")
DEVICE_NEEDS = re.compile(r"The plan above is the CPU alone's: .*a plan with the GPU runs from ([\d.]+) MiB")
RUNTIME_NEEDS = re.compile(r"use --dram ([\d.]+) MiB or more")


def strata(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([STRATA_BIN, *args], capture_output=True, text=True, timeout=120)


def main() -> None:
    model = str(default_model())
    full = strata("generate", "-m", model, "--ctx", str(CTX), *RUN)
    assert full.returncode == 0, full.stderr

    # The least each counts, from a budget neither can run in.
    runtime = strata("generate", "-m", model, "--ctx", str(CTX), "--dram", "30M", *RUN)
    planned = strata("plan", "-m", model, "--dram", "30M")
    assert runtime.returncode != 0 and planned.returncode != 0, (runtime.stderr, planned.stderr)
    needs, fits = RUNTIME_NEEDS.search(runtime.stderr), PLAN_FITS.search(planned.stderr)
    assert needs and fits, (runtime.stderr, planned.stderr)
    least = float(needs[1])
    assert least <= float(fits[1]) <= least + 0.5, f"generate needs {least} MiB, plan says {fits[1]} MiB fits"
    refused = strata("plan", "-m", model, "--dram", f"{least - 0.2:.1f}M")
    assert refused.returncode != 0, f"plan --dram {least - 0.2:.1f}M made a plan the runtime refuses:\n{refused.stdout}"

    with tempfile.TemporaryDirectory() as tmp:
        # Budgets just below where another layer would stay resident were refused once (a layer
        # streamed adds a ring slot until the ring is full), and an F32 cache below the planner's
        # own floor: each with its KV type, which the plan carries.
        cases = [(mib, "f16") for mib in (round(least + 0.1, 1), 56, 62, 75, 95, 107.5, 130)]
        cases += [(58.7, "q4_0"), (86.2, "q4_0"), (60, "f32")]
        for mib, kv_type in cases:
            out = Path(tmp) / f"plan-{mib}-{kv_type}.json"
            made = strata("plan", "-m", model, "--dram", f"{mib}M", "--kv-type", kv_type, "-o", str(out))
            assert made.returncode == 0, f"plan --dram {mib}M:\n{made.stderr}"
            command = COMMAND.search(made.stderr)
            assert command, made.stderr
            args = shlex.split(command[1])
            assert args[args.index("--dram") + 1] == f"{mib}M" and args[args.index("--ctx") + 1] == str(CTX), args
            ran = strata(*args, *RUN)
            assert ran.returncode == 0, f"plan --dram {mib}M --kv-type {kv_type}, then {command[1]}:\n{ran.stderr}"
            alone = full if kv_type == "f16" else strata("generate", "-m", model, "--ctx", str(CTX), "--kv-type", kv_type, *RUN)
            assert ran.stdout == alone.stdout, f"--dram {mib}M by its plan gave {ran.stdout!r}, all in memory {alone.stdout!r}"
    print(f"ok: plan and generate both need {least} MiB; plans from there to 130 MiB (F16, Q4_0, F32 caches) run with the same tokens")
    check_device_plans(model, full.stdout, least)


def check_device_plans(model: str, all_in_memory: str, cpu_least: float) -> None:
    # Above the CPU alone's least, below the device backend's for a GPU budget that leaves layers
    # and the KV cache in DRAM beside its staging and load buffers.
    beside_h200 = ["plan", "-m", model, "--machine", "this", "--gpu", "h200"]
    short_gpu = ["--gpu-budget", "60M"]
    short = strata(*beside_h200, *short_gpu, "--dram", f"{cpu_least + 1:.1f}M")
    assert short.returncode == 0, short.stderr
    needs = DEVICE_NEEDS.search(short.stdout)
    assert needs, f"plan --dram {cpu_least + 1:.1f}M beside an H200 named no least for the device:\n{short.stdout}"
    least = float(needs[1])
    sim = ["generate", "-m", model, "--device", "sim", "--gpu-mem", "1G", "--ctx", str(CTX), *RUN]
    with tempfile.TemporaryDirectory() as tmp:
        # Layers in DRAM and on disk beside the KV cache on the host; then every layer and the
        # KV cache on the device.
        cases = [(round(least + 0.1, 1), short_gpu), (80, short_gpu), (72, short_gpu), (80, []), (200, [])]
        for mib, gpu_budget in cases:
            out = Path(tmp) / f"device-{mib}-{len(gpu_budget)}.json"
            made = strata(*beside_h200, *gpu_budget, "--dram", f"{mib}M", "-o", str(out))
            assert made.returncode == 0, made.stderr
            assert json.loads(out.read_text())["has_gpu"], f"plan --dram {mib}M left the GPU out:\n{made.stdout}"
            ran = strata(*sim, "--plan", str(out), "--dram", f"{mib}M")
            assert ran.returncode == 0, f"the device plan for --dram {mib}M {gpu_budget}:\n{ran.stderr}"
            assert ran.stdout == all_in_memory, f"--dram {mib}M {gpu_budget} by its device plan gave {ran.stdout!r}"
            if mib == round(least + 0.1, 1):
                refused = strata(*sim, "--plan", str(out), "--dram", f"{least - 0.2:.1f}M")
                needs = RUNTIME_NEEDS.search(refused.stderr)
                assert refused.returncode != 0 and needs, refused.stderr
                assert abs(float(needs[1]) - least) <= 0.1, f"generate needs {needs[1]} MiB, plan named {least} MiB"
            if mib == 80 and not gpu_budget:
                check_device_kv_least(out, beside_h200, sim, all_in_memory)
            if mib == 200:
                check_device_kv_beside_cpu_layers(out, sim, all_in_memory)
    print(f"ok: a device plan needs {least} MiB of DRAM in plan and generate alike, and runs from there with the same tokens")


def check_device_kv_least(all_on_device: Path, beside_h200: list[str], sim: list[str], all_in_memory: str) -> None:
    # Every layer and the KV cache on the device, the host holding none of the cache: the least
    # generate names for the plan is where plan makes it too, shows that DRAM, and it runs there.
    refused = strata(*sim, "--plan", str(all_on_device), "--dram", "1M")
    needs = RUNTIME_NEEDS.search(refused.stderr)
    assert refused.returncode != 0 and needs, refused.stderr
    least = float(needs[1])
    out = all_on_device.with_name("device-kv-least.json")
    made = strata(*beside_h200, "--dram", f"{least}M", "-o", str(out))
    assert made.returncode == 0 and json.loads(out.read_text())["has_gpu"], f"plan --dram {least}M:\n{made.stdout}"
    shown = re.search(r"DRAM ([\d.]+) MiB of", made.stdout + made.stderr)
    assert shown and abs(float(shown[1]) - least) <= 0.1, f"generate needs {least} MiB, plan shows:\n{made.stdout}"
    ran = strata(*sim, "--plan", str(out), "--dram", f"{least}M")
    assert ran.returncode == 0 and ran.stdout == all_in_memory, f"--dram {least}M:\n{ran.stderr}"
    below = strata(*sim, "--plan", str(out), "--dram", f"{least - 0.2:.1f}M")
    assert below.returncode != 0, f"--dram {least - 0.2:.1f}M, below the least named, ran"


def check_device_kv_beside_cpu_layers(all_on_device: Path, sim: list[str], all_in_memory: str) -> None:
    # The KV cache on the device, two thirds of the layers left to the CPU, whose KV the host
    # keeps unspilled (made by hand: the planner keeps such KV in DRAM). generate once named the
    # least with the cache spilled (the ring of three layers), then refused the plan there.
    plan = json.loads(all_on_device.read_text())
    for layer in plan["layers"]:
        layer["kv"] = "gpu"
        if layer["layer"] >= 10:
            layer["weights"], layer["attention"] = "dram(cpu)", "cpu"
    path = all_on_device.with_name("device-kv-cpu-layers.json")
    path.write_text(json.dumps(plan))
    refused = strata(*sim, "--plan", str(path), "--dram", "40M")
    needs = RUNTIME_NEEDS.search(refused.stderr)
    assert refused.returncode != 0 and needs, refused.stderr
    assert "the KV cache of the layers it leaves to the CPU" in refused.stderr, refused.stderr
    ran = strata(*sim, "--plan", str(path), "--dram", f"{needs[1]}M")
    assert ran.returncode == 0, f"--dram {needs[1]}M, the least generate named:\n{ran.stderr}"
    assert ran.stdout == all_in_memory, f"the plan with KV on the device beside CPU layers gave {ran.stdout!r}"
    below = strata(*sim, "--plan", str(path), "--dram", f"{float(needs[1]) - 0.2:.1f}M")
    assert below.returncode != 0, f"--dram {float(needs[1]) - 0.2:.1f}M, below the least named, ran"


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""`strata plan` when a workload outgrows the machine: it says so (it does not fit even with
NVMe, or misses a decode target) and `--export vllm|sglang|llama-rpc` writes a launch whose
every flag is one the engine defines: checked against tests/fixtures/engine_flags/, read from
the engines' own sources (tests/reference/make_engine_flags.py names the versions)."""
from __future__ import annotations

import shlex
import subprocess
import time

from strata_support import SOURCE_DIR, STRATA_BIN, default_model

FLAGS = SOURCE_DIR / "tests" / "fixtures" / "engine_flags"
# The programs each launch runs, by the fixture of their options.
PROGRAMS = {"vllm": "vllm_serve", "ray": "ray_start", "sglang.launch_server": "sglang_launch_server",
            "llama-server": "llama_server", "rpc-server": "rpc_server"}
# A workstation that cannot hold Llama-3-405B, even streaming it from its disk.
SMALL_BOX = ["--gpu", "rtx4090", "--dram", "64G", "--nvme", "gen4", "--nvme-size", "500G"]


def known_flags(fixture: str) -> set[str]:
    lines = (FLAGS / f"{fixture}.txt").read_text().splitlines()
    assert lines[0].startswith("# ") and "==" in lines[0], lines[0]  # names its source and version
    return {l for l in lines if l and not l.startswith("#")}


def commands(script: str) -> list[list[str]]:
    """Each command line of the script (continuations joined), as words."""
    out, pending = [], ""
    for line in script.splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        pending += line.rstrip("\\") + " "
        if not line.endswith("\\"):
            if pending.strip():
                out.append(shlex.split(pending, comments=True))
            pending = ""
    return out


def checked_flags(script: str) -> dict[str, int]:
    """Every flag of every engine command, checked against its fixture; counts by program."""
    counts: dict[str, int] = {}
    for words in commands(script):
        for i, w in enumerate(words):
            program = next((p for p in PROGRAMS if w == p or w.endswith("/" + p)), None)
            if program is None:
                continue
            allowed = known_flags(PROGRAMS[program])
            for flag in words[i + 1:]:
                if flag.startswith("-") and not flag.lstrip("-").replace(".", "").isdigit():
                    name = flag.split("=", 1)[0]
                    assert name in allowed, f"{program} has no option {name}:\n{script}"
                    counts[program] = counts.get(program, 0) + 1
            break
    return counts


def plan(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([STRATA_BIN, "plan", *args], capture_output=True, text=True, timeout=120, check=check)


def value(script: str, flag: str) -> str:
    for words in commands(script):
        if flag in words:
            return words[words.index(flag) + 1]
    raise AssertionError(f"{flag} not in:\n{script}")


def main() -> None:
    start = time.time()
    # Too big for the box: the plan says so and names the way out.
    refused = plan("--shape", "llama3-405b", *SMALL_BOX, check=False)
    assert refused.returncode != 0 and "does not fit this machine" in refused.stderr and "--export" in refused.stderr, refused.stderr

    workload = ["--prompt-len", "4096", "--gen-len", "1024", "-b", "16"]
    for engine, expect in [("vllm", {"vllm", "ray"}), ("sglang", {"sglang.launch_server"}), ("llama-rpc", {"llama-server", "rpc-server"})]:
        r = plan("--shape", "llama3-405b", *SMALL_BOX, *workload, "--export", engine)
        script = r.stdout
        assert script.startswith("#!/bin/sh") and "does not fit this machine" in script, script[:400]
        assert "Sizing, from Strata's catalog" in script and "h100-80g" in script, script
        counts = checked_flags(script)
        assert set(counts) == expect, (engine, counts)
        assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0, script  # valid shell
        if engine == "vllm":
            # 756 GiB of BF16 weights and 39.4 GiB of KV: 16 H100s, a node's 8 in tensor parallel, 2 stages.
            assert value(script, "--tensor-parallel-size") == "8" and value(script, "--pipeline-parallel-size") == "2", script
            assert value(script, "--max-model-len") == "5120" and value(script, "--max-num-seqs") == "16", script
            assert value(script, "--distributed-executor-backend") == "ray"
            assert "\"meta-llama/Llama-3.1-405B\"" in script, script  # the checkpoint the catalog cites
        if engine == "sglang":
            assert value(script, "--tp-size") == "8" and value(script, "--pp-size") == "2" and value(script, "--nnodes") == "2"
        if engine == "llama-rpc":
            assert value(script, "--ctx-size") == str(5120 * 16) and value(script, "--parallel") == "16", script

    # A model that fits, but misses a decode target on this box: said, and sized for the target.
    fits = plan("--shape", "llama3-8b", "--gpu", "rtx4090", "--dram", "64G", "--target-tps", "200")
    assert "misses the workload's targets" in fits.stdout and "--target-tps" in fits.stdout, fits.stdout
    fast = plan("--shape", "llama3-8b", "--gpu", "rtx4090", "--dram", "64G", "--target-tps", "200", "--export", "vllm").stdout
    assert int(value(fast, "--tensor-parallel-size")) > 1 and set(checked_flags(fast)) == {"vllm"}, fast

    # A GGUF file is served as it is, by its stem.
    model = default_model()
    for engine in ("vllm", "sglang", "llama-rpc"):
        script = plan("-m", str(model), "--gpu", "none", "--export", engine).stdout
        assert str(model) in script and model.stem in script, script
        checked_flags(script)
    bad = plan("--shape", "llama3-8b", "--export", "tgi", check=False)
    assert bad.returncode != 0 and "vllm, sglang or llama-rpc" in bad.stderr, bad.stderr
    print(f"ok ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Flags given values no run can use are refused before anything runs: a whole number below a
flag's least is named with what to give (not CLI11's 309-digit bound), sampling parameters that
are not finite numbers are refused by name, a context whose KV cache the machine cannot hold is
refused by its size (and the flag that sized it named), -n -1 generates until the context is full, and a refused `generate` prints
nothing of its prompt to standard output. Far more threads than the machine has are refused,
results standard output cannot take fail the run, and a model computing NaN stops with an error."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile

from strata_support import STRATA_BIN, tiny_llama


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([STRATA_BIN, *args], capture_output=True, text=True, timeout=120)


def nan_model(src: str, dst: str) -> str:
    """A copy of `src` whose token table holds NaN, written through gguf's own reader."""
    import shutil

    import gguf
    shutil.copy(src, dst)
    reader = gguf.GGUFReader(dst, "r+")
    next(t for t in reader.tensors if t.name == "token_embd.weight").data[...] = float("nan")
    reader.data.flush()
    return dst


def f16_norm_model(src: str, dst: str) -> str:
    """A copy of `src` whose output_norm.weight says it is F16 (type id 1) where Strata reads norms as F32."""
    import shutil

    import gguf
    shutil.copy(src, dst)
    reader = gguf.GGUFReader(dst, "r+")
    info = next(t for t in reader.tensors if t.name == "output_norm.weight").field
    info.parts[-2][0] = int(gguf.GGMLQuantizationType.F16)  # the parts: name length, name, dims, shape, type, offset
    reader.data.flush()
    return dst


def main() -> None:
    model = str(tiny_llama())
    generate = ["generate", "-m", model, "-p", "Once upon a time"]

    ok = run(*generate, "-n", "4", "--temp", "0")
    assert ok.returncode == 0 and ok.stdout.startswith("Once upon a time"), ok.stderr

    for flags, said in [(["--ctx", "-5"], "--ctx: -5 is below 0; give 0 or more"),
                        (["-t", "-2"], "--threads: -2 is below 0; give 0 or more"),
                        (["-t", "two"], "--threads: two is not a whole number"),
                        (["--ctx", "9999999999"], "--ctx: 9999999999 is more than 2147483647"),
                        (["--top-k", "-5"], "--top-k: -5 is below 0"), (["--top-p", "2"], "--top-p: Value 2 not in range"),
                        (["-f", "/etc/hostname"], "--prompt excludes --file"),
                        (["--trace", "/nonexistent/dir/t.json"], "cannot write the trace '/nonexistent/dir/t.json'"),
                        (["-s", "-5"], "--seed: -5 is not a seed"), (["-s", "99999999999999999999"], "is not a seed"),
                        (["--gpu-mem", "-1"], "or 0 for the CPU alone")]:
        r = run(*generate, *flags)
        assert r.returncode != 0 and said in r.stderr, f"{flags}: {r.stderr}"
        assert len(r.stderr) < 400, f"{flags}: a short message, not a 309-digit bound: {r.stderr}"
    # -n -1 (llama.cpp's "infinite") runs until the context is full; below it nothing is a count.
    r = run(*generate, "-n", "-1", "--ctx", "48", "--temp", "0", "--ignore-eos", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stop_reason"] == "context" and len(out["prompt_tokens"]) + len(out["tokens"]) >= 48, out
    # A context past what the model was trained on runs, with a warning saying so.
    r = run(*generate, "-n", "2", "--ctx", "4096")
    assert r.returncode == 0 and "past the 2048 this model was trained on" in r.stderr, r.stderr
    # A flag or a command that does not exist: the same two lines as every error.
    r = run(*generate, "--bogus")
    assert r.returncode != 0 and "strata: error:" in r.stderr and "hint: `strata generate --help`" in r.stderr, r.stderr
    # A typo, or llama.cpp's underscores, gets the flag meant.
    r = run(*generate, "--tmep", "0")
    assert r.returncode != 0 and "has no flag --tmep" in r.stderr and "did you mean --temp?" in r.stderr, r.stderr
    r = run("serve", "--max_batch", "4")
    assert r.returncode != 0 and "did you mean --max-batch?" in r.stderr, r.stderr
    # An empty model path (an unset variable) is refused, not taken for the default model.
    r = run("generate", "-m", "", "-p", "hi", "-n", "1")
    assert r.returncode != 0 and "--model: an empty path names no file" in r.stderr, r.stderr
    # Device flags given to a run with no device are said to do nothing, not dropped in silence.
    r = run(*generate, "-n", "2", "--device", "cpu", "--attention", "gpu")
    assert r.returncode == 0 and "--attention gpu has no effect: the run uses no device" in r.stderr, r.stderr
    # A flag given twice takes the last, as a command line edited by appending expects.
    once = run(*generate, "-n", "4", "--temp", "0", "--json")
    twice = run(*generate, "-n", "4", "--temp", "1.5", "--seed", "7", "--temp", "0", "--json")
    assert once.returncode == 0 and twice.returncode == 0, twice.stderr
    assert json.loads(once.stdout)["tokens"] == json.loads(twice.stdout)["tokens"], (once.stdout, twice.stdout)
    r = run("bogus")
    assert r.returncode != 0 and "'bogus' is not a command" in r.stderr, r.stderr
    r = run(*generate, "-n", "2", "-s", "-1")  # llama.cpp's "a new seed", not 2^64 - 1
    assert r.returncode == 0, r.stderr
    r = run(*generate, "-n", "-2")
    assert r.returncode != 0 and "--n-predict: -2 is below -1; give -1 or more" in r.stderr, r.stderr
    # A file whose weights are not numbers is an error, not a stream of <unk>.
    with tempfile.TemporaryDirectory() as d:
        r = run("generate", "-m", nan_model(model, f"{d}/nan.gguf"), "-p", "Once upon a time", "-n", "4", "--temp", "0")
        assert r.returncode != 0 and "not numbers (NaN)" in r.stderr, r.stderr
        r = run("embed", "-m", f"{d}/nan.gguf", "-p", "Once upon a time")
        assert r.returncode != 0 and "not numbers (NaN)" in r.stderr, r.stderr
        # A norm of another type than F32 is refused with what norms must be, not a list of weight types.
        r = run("generate", "-m", f16_norm_model(model, f"{d}/f16norm.gguf"), "-p", "Once", "-n", "2")
        assert r.returncode != 0 and "output_norm.weight' has type F16" in r.stderr and "read as F32" in r.stderr, r.stderr
        r = run("perplexity", "-m", f"{d}/nan.gguf", "-f", __file__, "--chunk", "64")  # not "PPL = nan" and exit 0
        assert r.returncode != 0 and "not numbers (NaN)" in r.stderr and "PPL =" not in r.stdout, r.stdout + r.stderr
    # A cache folder nothing can be written to (full, read-only, or a file): the run goes on
    # without the prefix cache's spill and the quick probe's cache, saying so.
    with tempfile.TemporaryDirectory() as d:
        open(f"{d}/strata", "w").write("a file where the cache folder should be")
        r = subprocess.run([STRATA_BIN, *generate, "-n", "2"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, XDG_CACHE_HOME=d))
        assert r.returncode == 0 and r.stdout.startswith("Once upon a time"), r.stderr
        assert "prefix-cache blocks are dropped" in r.stderr, r.stderr
    r = run("perplexity", "-m", model, "-f", __file__, "-c", "128", "--chunk", "512")
    assert r.returncode != 0 and "--ctx 128 cannot hold a chunk of 512 tokens" in r.stderr, r.stderr
    r = run("plan", "--export", "vllm", "--json", "--shape", "llama3-8b")  # two outputs on one stream: refused, not one dropped
    assert r.returncode != 0 and "one output at a time" in r.stderr, r.stderr
    r = run("plan", "--ui", "--export", "vllm", "--shape", "llama3-8b")  # the page plans in the browser: nothing to export
    assert r.returncode != 0 and "--export writes this command's plan" in r.stderr, r.stderr
    # --gpu-budget 0 plans the CPU alone, as the runtime's --gpu-mem 0 runs it (not a refusal).
    r = run("plan", "--shape", "llama3-8b", "--gpu", "rtx4090", "--gpu-budget", "0")
    assert r.returncode == 0 and "no GPU" in r.stdout and " gpu " not in r.stdout, r.stdout + r.stderr
    # A GPU too small for any device placement's working set, on a machine whose CPU alone holds
    # the workload: the budget is named, with the CPU alone as the way out, not the machine.
    r = run("plan", "--shape", "llama3-8b", "--gpu", "t4", "--gpu-mem", "1G")
    assert r.returncode != 0 and "GPU budget" in r.stderr and "--gpu-budget 0" in r.stderr, r.stderr
    assert "does not fit this machine" not in r.stderr, r.stderr
    # A saved plan's KV type is the one that runs (it was sized and priced for it), unless
    # --kv-type says otherwise, which is warned about.
    with tempfile.TemporaryDirectory() as d:
        assert run("plan", "-m", model, "--kv-type", "Q4_0", "-o", f"{d}/q4.json").returncode == 0
        by_plan = run(*generate, "-n", "8", "--temp", "0", "--plan", f"{d}/q4.json", "--show-plan")
        by_flag = run(*generate, "-n", "8", "--temp", "0", "--kv-type", "q4_0")
        assert by_plan.returncode == 0 and "KV Q4_0 (given)" in by_plan.stderr, by_plan.stderr
        assert by_plan.stdout == by_flag.stdout, (by_plan.stdout, by_flag.stdout)
        r = run(*generate, "-n", "2", "--plan", f"{d}/q4.json", "--kv-type", "f16")
        assert r.returncode == 0 and "runs in place of the plan's KV type Q4_0" in r.stderr, r.stderr
        # A plan made for a batch of 64 runs one sequence here, and is priced as that.
        assert run("plan", "-m", model, "--objective", "throughput", "-b", "64", "-o", f"{d}/b64.json").returncode == 0
        r = run(*generate, "-n", "4", "--plan", f"{d}/b64.json", "--show-plan")
        assert r.returncode == 0 and "1 sequence per pass" in r.stderr and "batch of 1" in r.stderr, r.stderr
    # Options that contradict each other are refused, not one of them dropped.
    r = run("plan", "-m", model, "--shape", "llama3-8b")
    assert r.returncode != 0 and "both name the model" in r.stderr, r.stderr
    r = run("plan", "--shape", "llama3-8b", "--gpu", "none", "--gpu-mem", "1G")
    assert r.returncode != 0 and "--gpu none plans without one" in r.stderr, r.stderr
    # A workload longer than the model was trained for plans, with a warning saying so.
    r = run("plan", "-m", model, "--prompt-len", "4000")
    assert r.returncode == 0 and "positions (prompt and reply) are more than the 2048" in r.stderr, r.stderr
    # A --dram too small for any plan names the smallest that fits, and that one plans.
    r = run("plan", "-m", model, "--dram", "100K")
    found = re.search(r"--dram ([\d.]+ [KMG]iB) fits", r.stderr)
    assert r.returncode != 0 and found, r.stderr
    smallest = found.group(1).replace(" ", "").replace("iB", "")
    assert run("plan", "-m", model, "--dram", smallest).returncode == 0, smallest
    for flag in ("--nvme-bw", "--target-tps", "--target-ttft", "--target-throughput"):  # 0, below 0 or nan mean "not given"
        for value in ("0", "-1", "nan"):
            r = run("plan", "--shape", "llama3-8b", flag, value)
            assert r.returncode != 0 and f"{flag}: {value} is not a number above 0" in r.stderr, r.stderr
    # --bf16-prefill says so where the CPU has no AMX to run it (and nothing where it has).
    r = run(*generate, "-n", "2", "--bf16-prefill")
    amx = "amx_bf16" in open("/proc/cpuinfo").read() and os.environ.get("STRATA_AMX") != "0"
    assert r.returncode == 0 and ("runs no AMX" in r.stderr) != amx, r.stderr
    r = run(*generate, "-n", "2", "--dram", "64T")  # more than any machine here: runs, saying what it means
    assert r.returncode == 0 and "--dram 64 TiB is more than this machine's" in r.stderr, r.stderr
    r = run("embed", "-m", model, "-p", "Once", "-p", "")  # as generate refuses an empty prompt
    assert r.returncode != 0 and "-p number 2 is empty" in r.stderr and r.stdout == "", r.stdout + r.stderr
    r = run(*generate, "-t", "100000")
    assert r.returncode != 0 and "far more threads" in r.stderr and "give at most" in r.stderr, r.stderr
    # Results standard output cannot take (a full disk) fail the run instead of vanishing.
    for args in (generate + ["-n", "2"], ["list"], ["inspect", "--json", model]) if os.path.exists("/dev/full") else ():
        with open("/dev/full", "w") as full:
            r = subprocess.run([STRATA_BIN, *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
        assert r.returncode != 0 and "writing the results to standard output failed" in r.stderr, (args, r.stderr)

    # A context whose KV cache no machine holds (5 TiB): refused by its size, not by the allocator.
    r = run(*generate, "--ctx", "2147483647")
    assert r.returncode == 1 and "needs a KV cache of" in r.stderr and "--ctx" in r.stderr, r.stderr
    r = run("plan", "-m", model, "-b", "0")
    assert r.returncode != 0 and "--batch: 0 is below 1; give 1 or more" in r.stderr, r.stderr
    # Sizes the command derives its context from are named, and counts that would wrap are refused.
    r = run("perplexity", "-m", model, "-f", __file__, "--chunk", "2000000000")
    assert r.returncode == 1 and "needs a KV cache of" in r.stderr and "smaller --chunk" in r.stderr, r.stderr
    r = run("perplexity", "-m", model, "-f", __file__, "--max-tokens", "100")
    assert r.returncode == 1 and "--max-tokens 100 of" in r.stderr and "fewer than one chunk" in r.stderr, r.stderr
    for flags, said in [(["-n", "2147483647"], "positions a context may hold"),
                        (["-b", "2147483647"], "positions a KV cache may hold"),
                        (["-b", "10000000", "-p", "8", "-n", "4"], "smaller -b, -d, -p or -n")]:
        r = run("bench", "-m", model, "-r", "1", *flags)
        assert r.returncode == 1 and said in r.stderr, (flags, r.stderr)

    for flags, name in [(["--temp", "nan"], "temperature"), (["--temp", "inf"], "temperature"),
                        (["--top-p", "nan"], "top-p"), (["--min-p", "-inf"], "min-p"),
                        (["--presence-penalty", "nan"], "presence penalty"),
                        (["--repeat-penalty", "0"], "repeat penalty"),
                        (["--repeat-last-n", "-3"], "window"),
                        (["-n", "-5"], "--n-predict: -5 is below -1")]:
        r = run(*generate, *flags, *([] if flags[0] == "-n" else ["-n", "4"]))
        assert r.returncode != 0 and name in r.stderr, f"{flags}: {r.stderr}"
        assert r.stdout == "", f"{flags}: a refused request echoed {r.stdout!r}"
    print("ok: bad values refused by name before anything ran")


if __name__ == "__main__":
    main()

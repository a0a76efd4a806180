#!/usr/bin/env python3
"""Device memory taken away under a running server: `strata serve` on the simulated device loses
most of the memory its run holds while eight requests are in flight (--sim-shrink-after); the
layers that no longer fit move to the CPU (a mixture of experts' held experts go back to the
host's CPU), every request completes with the answer the same prompt gets from a server that kept
its memory, /metrics counts the loss, and the requests after it are priced as the run goes on
(the moved layers or experts on the CPU), not as it was placed."""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from serve_support import Server
from strata_support import SOURCE_DIR, default_model, device_plan

MODEL = default_model()
N_CLIENTS = 8
MAX_TOKENS = 16
TOPICS = ["the sea", "a cat", "winter", "bread", "a robot", "the moon", "trains", "a garden"]
GPU_MEM = 1 << 30
DEVICE = ("--device", "sim", "--gpu-mem", str(GPU_MEM), "--attention", "gpu", "--sim-link", "50", "--ctx", "1024",
          "--max-batch", "4")


def ask_priced(server: Server, i: int) -> tuple[str, float]:
    """The answer, and the decode tokens/s the plan predicted for it."""
    body = {"messages": [{"role": "user", "content": f"Write one sentence about {TOPICS[i]}."}],
            "max_tokens": MAX_TOKENS, "temperature": 0}
    status, _, data = server.request("POST", "/v1/chat/completions", body, timeout=300)
    assert status == 200, (status, data)
    return data["choices"][0]["message"]["content"], data["usage"]["timings"]["predicted"]["decode_tokens_per_s"]


def ask(server: Server, i: int) -> str:
    return ask_priced(server, i)[0]


def metric(text: str, name: str, default: float | None = None) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    if not m and default is not None:
        return default
    assert m, f"{name} missing from /metrics:\n{text}"
    return float(m.group(1))


def synthetic_moe(folder: Path) -> Path | None:
    """8 Qwen3-MoE-tiny layers (16 experts, 4 chosen), the default model's tokenizer; None
    without the gguf package."""
    try:
        import gguf  # noqa: F401  (bench/make_synthetic_gguf.py writes with it)
    except ImportError:
        return None
    path = folder / "moe.gguf"
    subprocess.run([sys.executable, str(SOURCE_DIR / "bench" / "make_synthetic_gguf.py"), "--shape", "qwen3moe-tiny", "--type",
                    "Q4_K", "--n-layer", "8", "--std", "0.1", "--tokenizer-from", str(MODEL), "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        # Every layer held on the device, whatever this machine's probe would choose, so that
        # losing memory moves layers.
        plan = device_plan(MODEL, Path(folder) / "on_device.json", "gpu")
        serve_through_a_loss(MODEL, DEVICE + ("--plan", str(plan)), 8 << 20, "strata_gpu_layers_moved_to_cpu",
                             "moved to the CPU with their KV cache")
        # All but 1 MiB taken: less than the head and activations, so the run leaves the device.
        serve_through_a_loss(MODEL, DEVICE + ("--plan", str(plan)), None, "strata_gpu_left", "the run goes on on the CPU alone")
        # A mixture of experts: every layer's attention on the device, half the layers' experts
        # held there too (64 of 3.6 MiB); losing memory gives held experts back to the host.
        moe = synthetic_moe(Path(folder))
        if moe is None:
            print("the mixture of experts: not run, gguf is missing (pip install gguf)")
            return
        # (Op offload off: its buffers for a long prompt's passes would be what goes first.)
        serve_through_a_loss(moe, DEVICE + ("--ot", r"blk\.[0-3]\.ffn_.*_exps=device", "--ot", "exps=dram", "--op-offload", "off"), 1 << 20,
                             "strata_gpu_experts_given_back_total", "given back to the host")


def serve_through_a_loss(model: Path, device: tuple[str, ...], short_by: int | None, moved_metric: str, moved_log: str) -> None:
    """`model` served with `device`, then again losing all but `short_by` bytes less than it held
    (None: all but 1 MiB of the device's memory)."""
    with Server(model, *device) as server:
        expected = [ask(server, i) for i in range(N_CLIENTS)]
        _, priced_as_placed = ask_priced(server, 0)
        _, _, metrics = server.request("GET", "/metrics")
        used = int(metric(metrics, 'strata_memory_used_bytes{tier="gpu"}'))
    assert len(set(expected)) > N_CLIENTS // 2, expected

    # After ten passes (the requests' prompts and first steps) all but `short_by` less than the
    # run held is taken away: layers or experts must leave the device while the requests decode.
    taken = GPU_MEM - (used - short_by) if short_by is not None else GPU_MEM - (1 << 20)
    left = GPU_MEM - taken
    with Server(model, *device, "--sim-shrink-after", f"10:{taken}") as server:
        with ThreadPoolExecutor(N_CLIENTS) as pool:
            answers = list(pool.map(lambda i: ask(server, i), range(N_CLIENTS)))
        assert answers == expected, (answers, expected)
        _, _, metrics = server.request("GET", "/metrics")
        assert metric(metrics, "strata_gpu_memory_lost_total") == 1, metrics
        assert metric(metrics, moved_metric) > 0, metrics
        assert metric(metrics, 'strata_memory_used_bytes{tier="gpu"}', default=0) <= left
        assert moved_log in server.stderr()
        # The server keeps serving after the loss, priced as it now runs.
        answer, priced = ask_priced(server, 0)
        assert answer == expected[0]
        assert priced != priced_as_placed, f"priced at {priced} tokens/s after the loss, as before it"
    print(f"ok: {N_CLIENTS} requests kept their answers through losing {taken >> 20} MiB of device memory")


if __name__ == "__main__":
    main()

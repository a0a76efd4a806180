"""The engine view beside the chat follows the server's metrics stream (/v1/metrics/stream),
not a poll. A mixture of experts whose experts do not all fit --dram (a synthetic
Qwen3-MoE-shaped model with the default model's tokenizer, made by bench/make_synthetic_gguf.py)
(attention on the simulated device, the experts on NVMe behind a DRAM cache): once a reply is done the view shows each tier's bytes (GPU, DRAM,
NVMe), the expert cache's hits and misses and the tokens generated as /metrics counts them;
while a reply runs it says "Generating 1", and once the reply has ended 0, as the server's
/metrics does. Screenshots for docs/web.md."""
import atexit
import math
import re
import shutil
import subprocess
import sys
import tempfile
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

from browser_support import SOURCE_DIR, Process, metrics, screenshots, send_message, session, streaming, wait_for  # first
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from strata_support import default_model, skip


def format_bytes(n: float) -> str:
    """As the page writes sizes (common.js formatBytes)."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    # JavaScript's toFixed and Math.round take halves up, where Python's round takes them to even.
    if n < 10 and i > 0:
        return f"{Decimal(n).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP)} {units[i]}"
    return f"{math.floor(n + 0.5)} {units[i]}"


def row(driver, name: str) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, f"#engine-stats dd[data-row='{name}']")
    return found[0].text if found else ""


def running(driver) -> str:
    return driver.find_element(By.ID, "engine-stats").get_attribute("data-running")


def main() -> int:
    tokenizer = default_model()
    folder = Path(tempfile.mkdtemp(prefix="strata-web-engine-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    model = folder / "moe.gguf"
    # The script's own packages, looked for in the python3 that runs it (this test may run under
    # the system's, for Selenium): without them the test cannot run; with them the script must work.
    has_packages = subprocess.run(["python3", "-c", "import importlib.util, sys; "
                                   "sys.exit(any(importlib.util.find_spec(m) is None for m in ('numpy', 'gguf')))"])
    if has_packages.returncode != 0:
        skip("python3 lacks numpy or gguf, which bench/make_synthetic_gguf.py needs (pip install numpy gguf)")
    made = subprocess.run(["python3", str(SOURCE_DIR / "bench" / "make_synthetic_gguf.py"), "--shape", "qwen3moe-tiny",
                           "--type", "Q4_K", "--n-layer", "8", "--std", "0.1", "--tokenizer-from", str(tokenizer), "-o", str(model)],
                          capture_output=True, text=True)
    assert made.returncode == 0, f"bench/make_synthetic_gguf.py failed: {made.stderr[-2000:]}"
    # Attention on the simulated device, the experts sent to NVMe behind a DRAM cache that holds
    # about a third of them (37M beside the device's staging, the head and the KV cache).
    with Process("serve", "-m", str(model), "--ctx", "512", "--dram", "37M", "--device", "sim", "--gpu-mem", "64M",
                 "--override-tensor", "exps=nvme", ready_path="/health") as server, session() as driver:
        driver.get(server.url("/"))
        wait_for(driver, lambda d: row(d, "Expert cache"), 30, "the expert cache in the engine view")
        # (the stream, not a poll of /metrics: an open stream has no resource entry until it ends)
        assert not driver.execute_script("return performance.getEntriesByType('resource').some((e) => e.name.endsWith('/metrics'))")

        send_message(driver, "The lighthouse keeper", 40)
        wait_for(driver, lambda d: streaming(d), 30, "the reply to start")
        wait_for(driver, lambda d: not streaming(d), 120, "the reply to end")

        # Quiet now, by the server's own gauge (60 s only guards against a hang): the view counts
        # the reply's tokens and, from then on (read in that order), says nothing is generating;
        # the view and /metrics agree.
        wait_for(driver, lambda d: metrics(server)["strata_requests_running"] == 0, 60, "the server to retire the reply")
        m = metrics(server)
        generated = f"{int(m['strata_generated_tokens_total'])} tokens"
        wait_for(driver, lambda d: row(d, "Generated") == generated and running(d) == "0", 60,
                 "the view to count the reply and say nothing is generating")
        hits, misses = int(m["strata_expert_cache_hits_total"]), int(m["strata_expert_cache_misses_total"])
        assert misses > 0, "37M should not hold every expert"
        wait_for(driver, lambda d: f"({hits} of {hits + misses})" in row(d, "Expert cache"), 5, "the expert cache's counts")
        assert f"{100 * hits / (hits + misses):.1f} % hits" in row(driver, "Expert cache"), row(driver, "Expert cache")
        used = lambda tier: format_bytes(m[f'strata_memory_used_bytes{{tier="{tier}"}}'])  # noqa: E731
        budget = lambda tier: format_bytes(m[f'strata_memory_budget_bytes{{tier="{tier}"}}'])  # noqa: E731
        assert row(driver, "GPU") == f"{used('gpu')} of {budget('gpu')}", row(driver, "GPU")
        assert row(driver, "DRAM") == f"{used('dram')} of {budget('dram')}", row(driver, "DRAM")
        assert m["strata_nvme_read_bytes_total"] > 0
        assert row(driver, "NVMe").startswith(f"{used('nvme')} read as needed"), row(driver, "NVMe")
        assert re.fullmatch(r"\d+ of \d+ blocks", row(driver, "KV cache")), row(driver, "KV cache")

        # A reply running is "Generating 1" while it runs.
        send_message(driver, "Tell me a very long story about the sea.", 400)
        wait_for(driver, lambda d: streaming(d) and running(d) == "1", 30, "the view to show the reply generating")
        # Narrow, the engine view is in the drawer: open there.
        screenshots(driver, "web-engine", lambda d: d.execute_script(
            "document.body.classList.toggle('sidebar-open', innerWidth < 700); document.getElementById('engine').scrollIntoView()"))
        driver.find_element(By.ID, "prompt").send_keys(Keys.ESCAPE)
        wait_for(driver, lambda d: not streaming(d), 10, "the reply to stop")
        wait_for(driver, lambda d: running(d) == "0", 60, "the view to say nothing is generating")
    print("ok: the engine view follows the metrics stream: tiers, expert cache, queue")
    return 0


if __name__ == "__main__":
    sys.exit(main())

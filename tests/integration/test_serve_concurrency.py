#!/usr/bin/env python3
"""16 streaming clients at once on one `strata serve`: every greedy answer equals the same
prompt's answer alone (asked one at a time beforehand), and /health answers during the load,
while the server is generating by its own count."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from serve_support import Server
from strata_support import default_model, skip

try:
    import openai
except ImportError:
    skip("the openai package is missing (pip install openai)")

MODEL = default_model()
N_CLIENTS = 16
MAX_TOKENS = 24
TOPICS = ["the sea", "a cat", "winter", "bread", "a robot", "the moon", "trains", "a garden",
          "music", "rain", "a library", "mountains", "coffee", "a lighthouse", "bees", "a city at night"]


def messages(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Write one sentence about {TOPICS[i]}."}]


def main() -> None:
    start = time.time()
    with Server(MODEL, "--max-batch", "8") as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=300)

        def ask(i: int, stream: bool) -> str:
            if not stream:
                r = client.chat.completions.create(model=MODEL.stem, messages=messages(i), max_tokens=MAX_TOKENS, temperature=0)
                return r.choices[0].message.content
            parts = []
            for chunk in client.chat.completions.create(model=MODEL.stem, messages=messages(i), max_tokens=MAX_TOKENS,
                                                        temperature=0, stream=True):
                if chunk.choices and chunk.choices[0].delta.content:
                    parts.append(chunk.choices[0].delta.content)
            return "".join(parts)

        alone = [ask(i, stream=False) for i in range(N_CLIENTS)]
        assert len(set(alone)) > N_CLIENTS // 2, alone  # different prompts, different answers

        health: list[dict] = []  # the answers to /health during the load
        health_failures: list[str] = []
        stop = threading.Event()

        def watch_health() -> None:
            while not stop.is_set():
                try:
                    # The timeout guards against a hang; it measures nothing.
                    status, _, body = server.request("GET", "/health", timeout=60)
                    if status == 200 and body.get("status") == "ok":
                        health.append(body)
                    else:
                        health_failures.append(f"{status} {body}")
                except OSError as e:
                    health_failures.append(repr(e))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch_health)
        watcher.start()
        try:
            with ThreadPoolExecutor(N_CLIENTS) as pool:
                together = list(pool.map(lambda i: ask(i, stream=True), range(N_CLIENTS)))
        finally:
            stop.set()
            watcher.join()
        for i, (a, b) in enumerate(zip(alone, together)):
            assert a == b, f"prompt {i}: alone {a!r}, with 15 others {b!r}"
        assert not health_failures, health_failures
        # Answered mid-generation, not after it: /health's own count of sequences running.
        busy = [h for h in health if h["running"] > 0]
        assert busy, health
        assert server.stop() == 0, server.stderr()
    print(f"ok: {N_CLIENTS} streams, /health answered {len(health)} times, {len(busy)} of them while generating, "
          f"{time.time() - start:.1f} s")


if __name__ == "__main__":
    main()

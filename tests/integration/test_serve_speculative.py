#!/usr/bin/env python3
"""`strata serve` speculating per request beside continuous batching (docs/speculative.md):
with a draft model (--draft-model), with the model's own first layers (--spec self) and with prompt
lookup's trees deeper than 16 nodes, greedy
answers asked at once by several clients equal the answers of a server that does not speculate;
/metrics counts the drafts verified and kept; a draft model of another vocabulary stops the
server at start with a message naming the difference.

The target runs on the simulated device with every layer's weights copied in each pass over a slow
link: a pass costs its copies whatever its rows, so drafting pays whatever the machine's load (on
the CPU alone a drafter that does not pay turns itself off, and the test would see no drafts)."""
from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor

from serve_support import Server
from strata_support import STRATA_BIN, default_model, device_plan, free_port, tiny_llama

MODEL = tiny_llama()
MAX_TOKENS = 40
PROMPTS = [
    # Rewrite a given text with a small edit.
    "Lily had a big red ball. She liked to play with the ball in the park. One day the ball went into the pond. "
    "Lily was sad. Now say it again with a blue ball: Lily had a big blue ball. She liked to",
    # Answer from a given document.
    "Tom lives in a small house near the sea. He has a dog named Max and a cat named Sam. Max likes to run on the "
    "beach. Who is Max? Max is",
    # Free stories.
    "Once upon a time",
    "One day a little bird",
]


def ask(server: Server, prompt: str) -> str:
    status, _, body = server.request("POST", "/v1/completions", {"model": MODEL.stem, "prompt": prompt,
                                                                 "max_tokens": MAX_TOKENS, "temperature": 0})
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == MAX_TOKENS or body["choices"][0]["finish_reason"] == "stop", body
    return body["choices"][0]["text"]


def counter(server: Server, name: str) -> float:
    status, _, text = server.request("GET", "/metrics")
    assert status == 200, text
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    assert found, f"{name} missing from /metrics"
    return float(found[1])


def check_speculating(target: list[str], args: list[str], plain: list[str], must_keep: bool) -> None:
    with Server(MODEL, "--max-batch", "4", *target, *args) as server:
        with ThreadPoolExecutor(len(PROMPTS)) as pool:  # every request at once: one batch
            together = list(pool.map(lambda p: ask(server, p), PROMPTS))
        assert together == plain, (args, together, plain)
        drafted = counter(server, "strata_draft_tokens_total")
        kept = counter(server, "strata_draft_tokens_accepted_total")
        print(f"{' '.join(args)}: {kept:.0f} of {drafted:.0f} draft tokens kept")
        assert drafted > 0, f"{args}: no draft was verified"
        if must_keep:
            assert kept > 0, f"{args}: no draft was kept"
        # A second round on the same server: the drafters' sequences of the first were freed.
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            assert list(pool.map(lambda p: ask(server, p), PROMPTS)) == plain


def check_serving(target: list[str]) -> None:
    with Server(MODEL, *target, "--spec", "off") as server:
        plain = [ask(server, p) for p in PROMPTS]  # one at a time, no drafts
    assert len(set(plain)) == len(PROMPTS), plain
    # The model drafting for itself: its guesses are its tokens, so they are kept.
    check_speculating(target, ["--draft-model", str(MODEL), "--spec", "draft"], plain, must_keep=True)
    check_speculating(target, ["--draft-model", str(MODEL)], plain, must_keep=True)  # --spec auto takes it
    check_speculating(target, ["--spec", "self"], plain, must_keep=False)
    # Prompt lookup's trees past 16 nodes (a layout of 16 slots a branch once put two nodes on one slot).
    check_speculating(target, ["--spec", "lookup", "--spec-width", "3", "--spec-depth", "24"], plain, must_keep=False)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        plan = device_plan(MODEL, Path(folder) / "copied_in.json", "dram->gpu")
        target = ["--device", "sim", "--sim-link", "0.05", "--gpu-mem", "256M", "--plan", str(plan)]
        check_serving(target)

    smollm2 = default_model()  # skips here when it is missing: the checks above have run
    refused = subprocess.run([STRATA_BIN, "serve", "-m", str(smollm2), "--draft-model", str(MODEL), "--port", str(free_port())],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode not in (0, -9), refused
    assert "vocabulary" in refused.stderr and "--draft-model" in refused.stderr, refused.stderr
    print("serve speculating with a draft model and with its own layers: ok")


if __name__ == "__main__":
    main()

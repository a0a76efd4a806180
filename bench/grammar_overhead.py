#!/usr/bin/env python3
"""What holding the output to a grammar costs decode: `strata generate` tokens/s free, with a
JSON schema (structured output) and with a GBNF grammar that refuses most drawn tokens, on the
same prompt, seed and length. Decode time includes sampling,
so the grammar's checks and masks are in it. The schema's array has no end, so a run lasts
the -n tokens unless the model closes it.

    bench/grammar_overhead.py [-m MODEL] [-n 128] [-r 5] [-t THREADS]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile

from common import default_model, log

SCHEMA = {"type": "array", "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "tags"]}}
# Only lowercase words and single spaces: most drawn tokens are refused and a mask is needed.
STRICT = 'root ::= [a-z]+ (" " [a-z]+)*\n'


def run(binary: str, model: str, n: int, threads: int | None, seed: int, extra: list[str]) -> tuple[float, int]:
    cmd = [binary, "generate", "-m", model, "-p", "A list of people as JSON:", "-n", str(n), "--temp", "0.8",
           "--seed", str(seed), "--json", *extra]
    if threads:
        cmd += ["-t", str(threads)]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return out["timings"]["decode_tokens_per_s"], len(out["tokens"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", default=default_model())
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", "--reps", type=int, default=5)
    ap.add_argument("-t", "--threads", type=int)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "..", "build", "strata"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        schema = os.path.join(tmp, "schema.json")
        with open(schema, "w") as f:
            json.dump(SCHEMA, f)
        strict = os.path.join(tmp, "strict.gbnf")
        with open(strict, "w") as f:
            f.write(STRICT)
        configs = {"free": [], "json schema": ["--json-schema", schema], "strict gbnf": ["--grammar", strict]}
        rates: dict[str, list[float]] = {k: [] for k in configs}
        lengths: dict[str, list[int]] = {k: [] for k in configs}
        for rep in range(a.reps):  # interleaved, so drift in the machine's speed hits all alike
            for name, extra in configs.items():
                rate, n = run(a.binary, a.model, a.n, a.threads, 100 + rep, extra)
                rates[name].append(rate)
                lengths[name].append(n)
                log(f"{name} rep {rep}: {rate:.1f} tokens/s over {n} tokens")
    base = statistics.median(rates["free"])
    print(f"| output | decode tokens/s (median of {a.reps}) | tokens | vs free |")
    print("|---|---|---|---|")
    for name in configs:
        med = statistics.median(rates[name])
        print(f"| {name} | {med:.1f} | {statistics.median(lengths[name]):.0f} | {100 * (med / base - 1):+.1f}% |")


if __name__ == "__main__":
    main()

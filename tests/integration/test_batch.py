#!/usr/bin/env python3
"""`strata batch` on a 200-line OpenAI batch file with bad lines: killed (SIGKILL) midway and
rerun, the output holds each good custom_id exactly once, an error record for each bad line,
no partial line, and the same greedy answers as an uninterrupted run. Interrupted (SIGINT)
with requests still to submit, it leaves at once with exit code 130, and a rerun completes it.
A file with no request, or none answered, exits 1."""
from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from strata_support import STRATA_BIN, default_model

MODEL = default_model()
N_LINES = 200
CTX = 256


def make_input(path: Path) -> tuple[set[str], dict[int, str | None]]:
    """Writes the file; returns the good custom_ids and, per bad line number, its custom_id."""
    good, bad = set(), {}
    lines = []
    for i in range(N_LINES):
        n = len(lines) + 1
        cid = f"req-{i}"
        if i % 2:
            req = {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                   "body": {"model": "m", "messages": [{"role": "user", "content": f"Say the number {i}."}],
                            "max_tokens": 3, "temperature": 0}}
        else:
            req = {"custom_id": cid, "method": "POST", "url": "/v1/completions",
                   "body": {"prompt": f"Item {i}: the", "max_tokens": 3, "temperature": 0}}
        if i == 10:
            lines.append('{"custom_id": "broken", "method": "POST", "url": ')  # not JSON
            bad[n] = None
            continue
        if i == 20:
            del req["custom_id"]
            bad[n] = None
        elif i == 30:
            req["body"]["temperature"] = "cold"
            bad[n] = cid
        elif i == 40:
            req["body"]["prompt"] = "word " * (CTX + 10)  # past the context
            bad[n] = cid
        elif i == 50:
            req["url"] = "/v1/embeddings"
            bad[n] = cid
        else:
            good.add(cid)
        lines.append(json.dumps(req))
    dup = json.loads(lines[5])  # a duplicate custom_id: reported and skipped
    dup["body"]["prompt"] = "something else"
    lines.append(json.dumps(dup))
    path.write_text("\n".join(lines) + "\n")
    return good, bad


def batch_cmd(inp: Path, out: Path) -> list[str]:
    return [STRATA_BIN, "batch", "-m", str(MODEL), "--ctx", str(CTX), "-i", str(inp), "-o", str(out), "--max-batch", "8"]


def read_records(out: Path) -> list[dict]:
    text = out.read_text()
    assert text == "" or text.endswith("\n"), "a partial last line"
    return [json.loads(line) for line in text.splitlines()]  # every line parses


def answers(records: list[dict]) -> dict[str, tuple]:
    result = {}
    for r in records:
        if r["error"] is None:
            body = r["response"]["body"]
            c = body["choices"][0]
            result[r["custom_id"]] = (c.get("text", c.get("message", {}).get("content")), c["finish_reason"],
                                      body["usage"]["completion_tokens"])
    return result


def check_output(records: list[dict], good: set[str], bad: dict[int, str | None]) -> None:
    ok_ids = [r["custom_id"] for r in records if r["error"] is None]
    assert sorted(ok_ids) == sorted(good), (len(ok_ids), len(good), set(good) - set(ok_ids))
    errors = {r["error"]["line"]: r for r in records if r["error"] is not None}
    assert len(errors) == len([r for r in records if r["error"] is not None]), "an error record twice"
    assert set(errors) == set(bad), (sorted(errors), sorted(bad))
    for line, cid in bad.items():
        assert errors[line]["custom_id"] == cid and errors[line]["response"] is None, errors[line]
        assert errors[line]["error"]["code"] and errors[line]["error"]["message"], errors[line]
    for r in records:
        if r["error"] is None:
            assert r["response"]["status_code"] == 200 and r["id"].startswith("batch_req_"), r


def main() -> None:
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        inp, ref, out = Path(tmp) / "in.jsonl", Path(tmp) / "ref.jsonl", Path(tmp) / "out.jsonl"
        good, bad = make_input(inp)

        fresh = subprocess.run(batch_cmd(inp, ref), capture_output=True, text=True, timeout=600)
        assert fresh.returncode == 0, fresh.stderr
        for line in bad:
            assert f"line {line}:" in fresh.stderr, (line, fresh.stderr)
        assert f"line {N_LINES + 1}: custom_id 'req-5' appeared before" in fresh.stderr, fresh.stderr
        reference = read_records(ref)
        check_output(reference, good, bad)

        # Killed midway, a partial line as a kill during a write would leave, then rerun.
        proc = subprocess.Popen(batch_cmd(inp, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 300
        while (not out.exists() or out.read_text().count("\n") < 60) and proc.poll() is None:
            assert time.time() < deadline, "no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        n_before = len(read_records(out))
        assert n_before < N_LINES - 10, f"the run finished ({n_before} records) before it could be killed"
        with out.open("a") as f:
            f.write('{"id": "batch_req_x", "custom_id": "req-199", "resp')
        rerun = subprocess.run(batch_cmd(inp, out), capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr
        assert "removed a partial last line" in rerun.stderr, rerun.stderr
        assert "already answered" in rerun.stderr, rerun.stderr
        records = read_records(out)
        check_output(records, good, bad)
        assert answers(records) == answers(reference)

        # A third run has nothing left to do.
        again = subprocess.run(batch_cmd(inp, out), capture_output=True, text=True, timeout=600)
        assert again.returncode == 0 and read_records(out) == records, again.stderr

        # Ctrl-C with most requests not yet submitted: the ones in flight are cancelled and it leaves.
        stopped = Path(tmp) / "stopped.jsonl"
        proc = subprocess.Popen(batch_cmd(inp, stopped), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 300
        while (not stopped.exists() or stopped.read_text().count("\n") < 30) and proc.poll() is None:
            assert time.time() < deadline, "no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("batch did not leave after Ctrl-C")
        assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, err)
        n_stopped = len(read_records(stopped))
        assert n_stopped < N_LINES - 10, f"the run finished ({n_stopped} records) before it could be interrupted"
        rerun = subprocess.run(batch_cmd(inp, stopped), capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0 and answers(read_records(stopped)) == answers(reference), rerun.stderr

        # Nothing to run, or nothing answered: not a success.
        empty, all_bad = Path(tmp) / "empty.jsonl", Path(tmp) / "bad.jsonl"
        empty.write_text("\n  \n")
        r = subprocess.run(batch_cmd(empty, Path(tmp) / "o1.jsonl"), capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and "holds no request" in r.stderr, r.stderr
        all_bad.write_text("not json\n[1, 2]\n")
        r = subprocess.run(batch_cmd(all_bad, Path(tmp) / "o2.jsonl"), capture_output=True, text=True, timeout=120)
        assert r.returncode == 1 and "no request of" in r.stderr and len(read_records(Path(tmp) / "o2.jsonl")) == 2, r.stderr
    print(f"ok: {len(good)} answers, {len(bad)} error records, killed after {n_before} records, interrupted after {n_stopped}, "
          f"{time.time() - start:.1f} s")


if __name__ == "__main__":
    main()

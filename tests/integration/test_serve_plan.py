"""POST /v1/plan answers with the very bytes `strata plan --json` prints for the same choices
(`strata plan --ui`, no model; and `strata serve`, where the page is public but the endpoint
needs the API key); a bad body is a 400 naming the field, a plan that cannot fit a 422."""
import http.client
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from strata_support import STRATA_BIN, free_port, tiny_llama

STORIES = tiny_llama()

CASES = [
    ({"model": "llama3-70b", "weight_type": "Q4_K", "gpu": "rtx4090", "gpu_mem": "16G", "dram": "64G", "nvme": "gen4"},
     ["--shape", "llama3-70b", "--weight-type", "Q4_K", "--gpu", "rtx4090", "--gpu-mem", "16G", "--dram", "64G", "--nvme", "gen4"]),
    ({"model": "opt-30b", "gpu": "t4", "dram": "200G", "nvme": "gen3", "batch": 32, "prompt_len": 1024, "gen_len": 32,
      "objective": "throughput", "kv_type": "auto"},
     ["--shape", "opt-30b", "--gpu", "t4", "--dram", "200G", "--nvme", "gen3", "-b", "32", "--prompt-len", "1024",
      "--gen-len", "32", "--objective", "throughput", "--kv-type", "auto"]),
    ({"model": "llama3-8b", "gpu": "none", "dram": "32G", "cpu": "ryzen9-7950x", "no_cpu_attention": True},
     ["--shape", "llama3-8b", "--gpu", "none", "--dram", "32G", "--cpu", "ryzen9-7950x", "--no-cpu-attention"]),
]


def start(args, ready):
    port = free_port()
    proc = subprocess.Popen([STRATA_BIN, *args, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read())
        try:
            if post_or_get(port, "GET", ready)[0] == 200:
                return proc, port
        except OSError:
            pass
        if time.time() > deadline:
            raise RuntimeError(f"{args} did not start")
        time.sleep(0.1)


def post_or_get(port, method, path, body=None, key=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    r = conn.getresponse()
    data = r.read().decode()
    conn.close()
    return r.status, data


def cli(flags):
    return subprocess.run([STRATA_BIN, "plan", *flags, "--json"], check=True, capture_output=True, text=True).stdout


def check_same(port, key=None):
    for body, flags in CASES:
        status, text = post_or_get(port, "POST", "/v1/plan", body, key)
        assert status == 200, (status, text)
        assert text == cli(flags), f"/v1/plan differs from `strata plan {' '.join(flags)} --json`"


def main() -> int:
    proc, port = start(["plan", "--ui"], "/v1/plan/options")
    try:
        check_same(port)
        status, text = post_or_get(port, "POST", "/v1/plan", {"model": "llama3-8b", "gpu": "none", "batch": 0})
        assert status == 400 and json.loads(text)["error"]["param"] == "batch", text
        status, text = post_or_get(port, "POST", "/v1/plan", {"model": "llama3-405b", "gpu": "rtx4090", "dram": "8G", "nvme_size": "10G"})
        assert status == 422, (status, text)
        assert json.loads(text)["error"]["code"] == "no_plan_fits"
        options = json.loads(post_or_get(port, "GET", "/v1/plan/options")[1])
        assert not options["chat"] and options["served_plan"] is None and {g["name"] for g in options["gpus"]} >= {"rtx4090", "h100-80g"}
        # The frontier and the decode step's drawing are `--frontier`'s and `--svg`'s.
        body, flags = CASES[1]
        status, text = post_or_get(port, "POST", "/v1/plan", {**body, "output": "frontier"})
        rows = json.loads(text)
        table = subprocess.run([STRATA_BIN, "plan", *flags, "--frontier"], check=True, capture_output=True, text=True).stdout
        listed = table[table.index("\nfrontier ("):].strip().splitlines()[2:]
        assert status == 200 and len(rows) == len(listed) > 0, (rows, listed)
        assert [str(r["batch"]) for r in rows] == [line.split()[0] for line in listed]
        svg = Path(tempfile.mkdtemp(prefix="strata-plan-svg-")) / "step.svg"
        subprocess.run([STRATA_BIN, "plan", *flags, "--svg", str(svg)], check=True, capture_output=True)
        status, text = post_or_get(port, "POST", "/v1/plan", {**body, "output": "svg"})
        assert status == 200 and text == svg.read_text()
        shutil.rmtree(svg.parent)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/")
        r = conn.getresponse()
        page = r.read().decode()
        conn.close()
        assert r.status == 200 and "plan.js" in page
        # Only the page's own scripts run, and it talks only to this server.
        csp = r.getheader("Content-Security-Policy")
        assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "unsafe" not in csp, csp
    finally:
        proc.terminate()
        proc.wait(30)

    proc, port = start(["serve", "-m", str(STORIES), "--api-key", "sesame", "--plan-prompt", "64"], "/health")
    try:
        assert post_or_get(port, "GET", "/")[0] == 200, "the page needs no key"
        assert post_or_get(port, "POST", "/v1/plan", CASES[0][0])[0] == 401
        check_same(port, key="sesame")
        # The served file is offered by name, and planned as `strata plan -m FILE` plans it.
        options = json.loads(post_or_get(port, "GET", "/v1/plan/options", key="sesame")[1])
        assert options["chat"] and STORIES.name in [m["name"] for m in options["local_models"]]
        # The plan the server runs by: stories260K's 5 layers, as Karpathy's llama2.c config has them.
        assert [l["layer"] for l in options["served_plan"]["layers"]] == list(range(5))
        # Weighed for the prompt --plan-prompt names, its KV cache the whole context's.
        workload = options["served_plan"]["workload"]
        assert workload["prompt_len"] == 64 and workload["kv_len"] == 2048, workload
        status, text = post_or_get(port, "POST", "/v1/plan", {"model": STORIES.name, "gpu": "rtx4090"}, "sesame")
        assert status == 200 and text == cli(["-m", str(STORIES), "--gpu", "rtx4090"]), text
        # Too little DRAM for the device backend's host buffers: the CPU alone's plan, and why.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/plan", body=json.dumps({"model": STORIES.name, "gpu": "rtx4090", "dram": "5M"}),
                     headers={"Content-Type": "application/json", "Authorization": "Bearer sesame"})
        r = conn.getresponse()
        plan = json.loads(r.read().decode())
        conn.close()
        note = r.getheader("X-Strata-Plan-Note") or ""
        assert r.status == 200 and not plan["has_gpu"] and "no plan with the GPU runs in 5 MiB" in note, (r.status, note)
        # The server plans for catalog hardware only: never for itself, whatever the request asks.
        status, text = post_or_get(port, "POST", "/v1/plan", {"model": "llama3-8b", "hw": "machine"}, "sesame")
        assert status == 400 and json.loads(text)["error"]["param"] == "hw", text
        assert options["machine"] is None and options["defaults"] is None
    finally:
        proc.terminate()
        proc.wait(30)
    # Unless told, weighed for a turn of 512 new tokens, its KV cache the whole context's.
    proc, port = start(["serve", "-m", str(STORIES)], "/health")
    try:
        workload = json.loads(post_or_get(port, "GET", "/v1/plan/options")[1])["served_plan"]["workload"]
        assert workload["prompt_len"] == 512 and workload["kv_len"] == 2048, workload
    finally:
        proc.terminate()
        proc.wait(30)
    print("ok: /v1/plan answers as `strata plan --json` does")
    return 0


if __name__ == "__main__":
    sys.exit(main())

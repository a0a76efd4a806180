#!/usr/bin/env python3
"""`strata serve --models-dir`: every GGUF of a folder served by its name (the file's stem, or
general.name as an alias), loaded on demand, the least recently used idle one unloaded to make
room (--max-models); an unknown name is a 404; /v1/models, /v1/models/{id} and `strata list`
describe them from their headers; each answer comes from the model named (checked against
`strata generate` on that file)."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from serve_support import Server, check_error_shape
from strata_support import STRATA_BIN, default_model, skip, tiny_llama

try:
    import gguf
    import openai
except ImportError as e:
    skip(f"{e.name} is missing (pip install {e.name})")

SMOL = default_model()
STORIES = tiny_llama()
PROMPT = "Once upon a time"


def greedy(model: Path, n: int) -> str:
    out = subprocess.run([STRATA_BIN, "generate", "-m", str(model), "-p", PROMPT, "-n", str(n), "--temp", "0", "--json"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    return json.loads(out)["text"]


def loaded(server: Server) -> set[str]:
    status, _, body = server.request("GET", "/api/ps")
    assert status == 200, body
    return {m["name"] for m in body["models"]}


def gguf_header_name(path: Path) -> str:
    out = subprocess.run([STRATA_BIN, "inspect", str(path), "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["metadata"].get("general.name", "")


def main() -> None:
    start = time.time()
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / SMOL.name).symlink_to(SMOL)
        (folder / "stories-a.gguf").symlink_to(STORIES)
        (folder / "stories-b.gguf").symlink_to(STORIES)
        (folder / "notes.txt").write_text("not a model")
        ids = sorted([SMOL.stem, "stories-a", "stories-b"])

        # `strata list` reads the same headers the server lists.
        listed = json.loads(subprocess.run([STRATA_BIN, "list", "--models-dir", d, "--json"], check=True,
                                           capture_output=True, text=True).stdout)
        assert sorted(m["id"] for m in listed["data"]) == ids, listed
        table = subprocess.run([STRATA_BIN, "list", "--models-dir", d], check=True, capture_output=True, text=True).stdout
        assert all(i in table for i in ids) and "CONTEXT" in table and "Q4_1" in table, table

        with Server(None, "--models-dir", d, "--max-models", "2") as server:
            assert SMOL.stem in server.banner and "2 more models" in server.banner, server.banner
            client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
            models = {m.id: m for m in client.models.list().data}
            assert sorted(models) == ids, models
            for m in listed["data"]:
                meta = models[m["id"]].model_extra["meta"]
                path = folder / f"{m['id']}.gguf"
                assert meta["size"] == path.stat().st_size and meta["architecture"] == "llama", meta
                assert meta["context_length"] > 0 and meta["quantization"], meta
            assert models[SMOL.stem].model_extra["meta"]["loaded"]  # the default one, loaded at start
            assert not models["stories-a"].model_extra["meta"]["loaded"]
            # The two copies of stories260K share a general.name, so neither answers to it.
            assert models["stories-a"].model_extra["meta"]["aliases"] == [], models["stories-a"]
            assert client.models.retrieve("stories-b").id == "stories-b"
            status, _, body = server.request("GET", "/v1/models/gpt-9-ultra")
            check_error_shape(body, 404, status, param="model", code="model_not_found")
            status, _, body = server.request("POST", "/v1/completions", {"model": "gpt-9-ultra", "prompt": PROMPT})
            check_error_shape(body, 404, status, param="model", code="model_not_found")
            assert loaded(server) == {SMOL.stem}

            # Each answer comes from the model named: loaded on demand.
            a = client.completions.create(model="stories-a", prompt=PROMPT, max_tokens=24, temperature=0)
            assert a.model == "stories-a" and a.choices[0].text == greedy(STORIES, 24), a
            assert loaded(server) == {SMOL.stem, "stories-a"}
            # A third model: the least recently used one (the default) makes room.
            b = client.completions.create(model="stories-b", prompt=PROMPT, max_tokens=8, temperature=0)
            assert b.choices[0].text == greedy(STORIES, 8), b
            assert loaded(server) == {"stories-a", "stories-b"}
            # No model named: the default one, loaded again; stories-a is now the least recent.
            smol = client.completions.create(model=SMOL.stem, prompt=PROMPT, max_tokens=16, temperature=0)
            assert smol.choices[0].text == greedy(SMOL, 16), smol
            assert loaded(server) == {"stories-b", SMOL.stem}
            status, _, body = server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 16, "temperature": 0})
            assert status == 200 and body["choices"][0]["text"] == smol.choices[0].text, body

            # SmolLM2's general.name is its alias: a second name for the same model.
            alias = gguf_header_name(SMOL)
            if alias:
                assert models[SMOL.stem].model_extra["meta"]["aliases"] == [alias], models[SMOL.stem]
                by_alias = client.completions.create(model=alias, prompt=PROMPT, max_tokens=16, temperature=0)
                assert by_alias.choices[0].text == smol.choices[0].text
            assert server.stop() == 0, server.stderr()

    # The memory budget decides too: two copies of SmolLM2 (about 200 MB each with their KV caches)
    # do not fit 300 MB together, so loading the second unloads the first.
    with tempfile.TemporaryDirectory() as d:
        for name in ("smol-a", "smol-b"):
            (Path(d) / f"{name}.gguf").symlink_to(SMOL)
        with Server(None, "--models-dir", d, "--dram", "300M") as server:
            assert loaded(server) == {"smol-a"}
            status, _, body = server.request("POST", "/v1/completions", {"model": "smol-b", "prompt": PROMPT, "max_tokens": 4})
            assert status == 200, body
            assert loaded(server) == {"smol-b"}, "the idle model was not unloaded for the one asked for"
            _, _, metrics = server.request("GET", "/metrics")
            assert f'strata_memory_budget_bytes{{tier="dram"}} {300 << 20}' in metrics, metrics
            assert server.stop() == 0, server.stderr()

    # A folder whose first model fails to load (its header reads, its tensors do not fit it): the
    # next one is the default, the broken one answers 500 when named, and the server runs.
    with tempfile.TemporaryDirectory() as d:
        broken = Path(d) / "a-broken.gguf"
        shutil.copy(STORIES, broken)
        reader = gguf.GGUFReader(broken, "r+")
        reader.fields["llama.attention.head_count"].parts[-1][0] = 4  # its attention tensors are shaped for 8
        reader.data.flush()
        del reader
        (Path(d) / "b-stories.gguf").symlink_to(STORIES)
        with Server(None, "--models-dir", d) as server:
            assert "b-stories" in server.banner, server.banner
            assert "a-broken failed to load" in server.stderr() and "b-stories is the default model" in server.stderr()
            status, _, body = server.request("POST", "/v1/completions", {"prompt": PROMPT, "max_tokens": 8, "temperature": 0})
            assert status == 200 and body["model"] == "b-stories" and body["choices"][0]["text"] == greedy(STORIES, 8), body
            status, _, body = server.request("POST", "/v1/completions", {"model": "a-broken", "prompt": PROMPT})
            check_error_shape(body, 500, status, param="model", code="model_load_failed")
            assert server.stop() == 0, server.stderr()
    print(f"ok ({time.time() - start:.1f} s)")


if __name__ == "__main__":
    main()

"""Shared helpers for the integration tests (run by ctest, see tests/CMakeLists.txt)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests

STRATA_BIN = os.environ.get("STRATA_BIN", str(Path(__file__).resolve().parents[2] / "build" / "strata"))
SOURCE_DIR = Path(os.environ.get("STRATA_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def skip(reason: str) -> None:
    print(f"skipped: {reason}")
    sys.exit(SKIP)


def cache_dir() -> Path:
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "strata"
    return Path.home() / ".cache" / "strata"


def default_model() -> Path:
    """The default SmolLM2 model; skips the test when it has not been fetched."""
    models = Path(os.environ["STRATA_MODELS"]) if os.environ.get("STRATA_MODELS") else cache_dir() / "models"
    path = models / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.exists():
        skip(f"the default model is not at {path} (run scripts/fetch_model.sh)")
    return path


def shared_dir() -> Path:
    """The shared folder beside the repository: $STRATA_SHARED, else ../shared."""
    return Path(os.environ["STRATA_SHARED"]) if os.environ.get("STRATA_SHARED") else SOURCE_DIR.parent / "shared"


def tiny_llama() -> Path:
    """stories260K when the shared folder has it, else a stand-in written once into a temporary
    folder (as tests/support/model_paths.h writes it): stories260K's shape, header and
    SentencePiece vocabulary with random weights, for tests that need a small llama with a
    tokenizer, not its trained text."""
    real = shared_dir() / "models" / "stories260K.gguf"
    if real.exists():
        return real
    sys.path.insert(0, str(SOURCE_DIR / "tests" / "reference"))
    import make_arch_fixtures as arch  # noqa: E402 (numpy and gguf, as the reference needs)
    vocab = json.loads((SOURCE_DIR / "tests" / "fixtures" / "tokenizer_vocab_stories260k.json").read_text())
    h = vocab["header"]
    config = arch.config("stories260K", "llama", n_vocab=len(vocab["tokens"]), n_embd=h["llama.embedding_length"],
                         n_layer=h["llama.block_count"], n_head=h["llama.attention.head_count"],
                         n_head_kv=h["llama.attention.head_count_kv"], n_ff=h["llama.feed_forward_length"],
                         n_rot=h["llama.rope.dimension_count"], n_ctx_train=h["llama.context_length"], tied=False,
                         vocab=vocab)
    path = Path(tempfile.mkdtemp(prefix="strata-test-")) / "stories260K-standin.gguf"
    arch.write_model(config, str(path))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def device_plan(model: Path, path: Path, weights: str) -> Path:
    """A plan (the JSON `strata plan --json` writes) with every layer's weights at `weights`
    ("gpu", "dram->gpu", ...) and its KV cache and attention on the device, written to `path`:
    the placement a test needs whatever this machine's probe would choose."""
    planned = subprocess.run([STRATA_BIN, "plan", "-m", str(model), "--machine", "flexgen-t4", "--json"],
                             capture_output=True, text=True, timeout=120, check=True)
    plan = json.loads(planned.stdout)
    for layer in plan["layers"]:
        layer.update(weights=weights, kv="gpu", attention="gpu")
    path.write_text(json.dumps(plan))
    return path

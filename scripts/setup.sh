#!/usr/bin/env bash
# Installs what Strata needs (Debian packages), builds it into build/ and fetches the
# default model. Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(cmake ninja-build pkg-config g++ python3 python3-pip unzip
  libdnnl-dev libtbb-dev liburing-dev libhwloc-dev hwloc libcpp-httplib-dev nlohmann-json3-dev
  libglpk-dev libcli11-dev libfmt-dev libspdlog-dev libedit-dev catch2
  libjs-marked node-dompurify libjs-highlight.js libjs-katex  # embedded in the web page (Markdown, sanitiser, highlighter, math)
  chromium chromium-driver python3-selenium)     # the web page's browser tests

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

BUILD_DIR=${STRATA_BUILD_DIR:-build}
[ -f "$BUILD_DIR/build.ninja" ] || cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)"

# What the tests import from PyPI (scripts/requirements.txt), so that every non-slow test runs.
python3 -c "import openai, jinja2, gguf, numpy, jsonschema, ollama, anthropic" 2>/dev/null || python3 -m pip install --quiet -r scripts/requirements.txt

scripts/fetch_model.sh

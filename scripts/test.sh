#!/usr/bin/env bash
# Builds Strata (installing what it needs), fetches the default model and runs the tests
# that CI runs: everything except those labelled slow. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir "${STRATA_BUILD_DIR:-build}" --output-on-failure -LE slow -j "$(nproc)" "$@"

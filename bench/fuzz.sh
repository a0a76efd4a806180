#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan + UBSan) and runs them.
#   bench/fuzz.sh TARGET|all SECONDS [libFuzzer flags...]
# TARGET is gguf, tokenizer, chat_template, plan, openai_request or plan_request (the fuzz_<name>
# executables). Each run starts from a scratch copy of tests/fuzz/corpus/<target>/ plus
# tests/fuzz/regressions/<target>/, so the committed seeds stay small; new inputs and crash
# files land in $STRATA_FUZZ_BUILD/runs/<target>/. Prints executions, coverage and any crash
# file; exits 1 when a target found something.
# Env: STRATA_FUZZ_BUILD (build folder, default build-fuzz), CC/CXX (default clang/clang++),
# STRATA_FUZZ_MODEL (BPE model, default the SmolLM2 cache path), STRATA_FUZZ_SPM_MODEL.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 2 ]]; then
    echo "usage: bench/fuzz.sh TARGET|all SECONDS [libFuzzer flags...]" >&2
    exit 2
fi
target=$1 seconds=$2
shift 2
build=${STRATA_FUZZ_BUILD:-build-fuzz}

all=()
for f in tests/fuzz/fuzz_*.cpp; do
    name=$(basename "$f" .cpp)
    [[ $name == fuzz_support ]] || all+=("${name#fuzz_}")
done
if [[ $target == all ]]; then targets=("${all[@]}"); else targets=("$target"); fi
for t in "${targets[@]}"; do
    [[ " ${all[*]} " == *" $t "* ]] || { echo "unknown target '$t'; choose one of: ${all[*]} or all" >&2; exit 2; }
done

if ! command -v "${CXX:-clang++}" >/dev/null || ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
    echo "fuzz: installing clang and libFuzzer (Debian packages clang, libclang-rt-dev)" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq clang libclang-rt-dev >/dev/null
fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
    -DSTRATA_FUZZ=ON -DSTRATA_BUILD_TESTS=OFF -DSTRATA_CUDA=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

status=0
for t in "${targets[@]}"; do
    run="$build/runs/$t"
    rm -rf "$run/corpus" "$run/artifacts"
    mkdir -p "$run/corpus" "$run/artifacts"
    for seeds in "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t"; do
        [[ -d $seeds ]] && cp "$seeds"/* "$run/corpus/" 2>/dev/null || true
    done
    n_seeds=$(ls "$run/corpus" | wc -l)
    echo "== fuzz_$t: ${seconds}s from $n_seeds seeds"
    set +e
    "$build/tests/fuzz/fuzz_$t" "$run/corpus" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$run/artifacts/" "$@" >"$run/log.txt" 2>&1
    rc=$?
    set -e
    grep -E '^#[0-9]+.*(DONE|pulse)' "$run/log.txt" | tail -1 || true
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$run/log.txt" || true
    echo "corpus now $(ls "$run/corpus" | wc -l) inputs; log: $run/log.txt"
    crashes=$(ls "$run/artifacts" 2>/dev/null || true)
    if [[ $rc -ne 0 || -n $crashes ]]; then
        status=1
        echo "FOUND (exit $rc):"
        for c in $crashes; do echo "  $run/artifacts/$c"; done
        grep -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer)|runtime error|violated|deadly signal' "$run/log.txt" || true
    fi
done
exit $status

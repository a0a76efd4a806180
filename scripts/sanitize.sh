#!/usr/bin/env bash
# Builds the tests with a sanitizer and runs them.
#   scripts/sanitize.sh address [ctest args...]   ASan + UBSan; default: every test but `slow`
#   scripts/sanitize.sh thread  [ctest args...]   TSan; default: the tests of threaded code
# The build goes to build-asan/ or build-tsan/ ($STRATA_SANITIZE_BUILD overrides). Any report
# fails the test that caused it (halt_on_error).
# Extra arguments go to ctest, e.g. `scripts/sanitize.sh thread -R 'unit:.*spill'`.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
case $mode in
    address)
        sanitize=address,undefined
        build=${STRATA_SANITIZE_BUILD:-build-asan}
        default_args=(-LE slow)
        ;;
    thread)
        sanitize=thread
        build=${STRATA_SANITIZE_BUILD:-build-tsan}
        # What runs on more than one thread: the worker pool, the scheduler, the io_uring and
        # pread readers, weight streaming, KV spill and the forward passes that use them all.
        # The parsers and the planner are single-threaded. Left out: the matmul test that runs
        # on a oneTBB arena. libtbb is not built with TSan, so its task hand-over and join are
        # invisible to it and every TBB loop reports races (in TBB's headers, then on the
        # loop's output read after the join) that no suppression can separate from real ones.
        default_args=(-LE slow -E 'on 1 and 2 threads'
                      -R 'unit:.*(thread|scheduler|batched|stream|trace|spill|read|concurrent|placement|residency|stories260K|forward|kv cache|cut short)')
        ;;
    *)
        echo "usage: scripts/sanitize.sh address|thread [ctest args...]" >&2
        exit 2
        ;;
esac
(($#)) && args=("$@") || args=("${default_args[@]}")

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=OFF -DSTRATA_SANITIZE="$sanitize" >/dev/null
targets=(strata strata_unit_tests)
# The model tests (the real SmolLM2) are part of the address run; under TSan they take too long.
[[ $mode == address && -n $(ls tests/model/*.cpp 2>/dev/null) ]] && targets+=(strata_model_tests)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${args[@]}"

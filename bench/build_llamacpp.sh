#!/usr/bin/env bash
# Builds llama.cpp's own llama-bench, llama-perplexity and llama-batched-bench, the peers
# bench/compare.py and bench/batched_decode.py measure Strata against, from the llama.cpp that
# the llama-cpp-python sdist vendors (the same source the reference fixtures in tests/ were made
# with).
#
#   bench/build_llamacpp.sh        # progress on stderr; the binaries' directory on stdout
#   bench/build_llamacpp.sh --spec # llama-lookup and llama-speculative (its examples) into build-spec/,
#                                  # the speculative-decoding peers (docs/speculative.md)
#   bench/build_llamacpp.sh --avx2 # the CPU build without AVX-512 into build-avx2/, the peer of
#                                  # STRATA_CPU=avx2 on an AVX-512 machine (a CPU without it, as
#                                  # many workstations' are)
#   bench/build_llamacpp.sh --cuda # the CUDA build (sm_90 machine code, no PTX, unless CUDA_ARCHS says), for a GPU
#                                  # machine: portable CPU code (AVX-512, no -march=native),
#                                  # built ahead (about 15 minutes on two cores) into build-cuda/
#
# Everything lives under STRATA_PEER_DIR (default ~/.cache/strata/peer), nothing in the repo;
# JOBS sets the build's parallelism (default: every core). A second run with the binaries in
# place and built from the same version and flags only prints the directory.
set -euo pipefail

VERSION=0.3.36               # llama-cpp-python
LLAMA_COMMIT=0c1e57098bba    # the llama.cpp commit that sdist vendors
LLAMA_BUILD=11312            # its upstream release tag, b11312

CUDA=0
[[ ${1:-} == --cuda ]] && CUDA=1
SPEC=0
[[ ${1:-} == --spec ]] && SPEC=1
AVX2=0
[[ ${1:-} == --avx2 ]] && AVX2=1

PEER_DIR=${STRATA_PEER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/peer}
SDIST=$PEER_DIR/llama_cpp_python-$VERSION.tar.gz
SRC=$PEER_DIR/llama_cpp_python-$VERSION/vendor/llama.cpp
BUILD=$PEER_DIR/build
((CUDA)) && BUILD=$PEER_DIR/build-cuda
((SPEC)) && BUILD=$PEER_DIR/build-spec
((AVX2)) && BUILD=$PEER_DIR/build-avx2
BIN=$BUILD/bin
INFO=$BIN/build-info.txt

# CPU only, tuned for this machine. -march=native enables AMX wherever the CPU has it, whatever
# GGML_AMX_* say, so the macros ggml's AMX path is compiled under are undefined as well: its
# tile kernels crash on the VMs this runs on. The sdist's git history is a one-commit shallow
# clone, so the build number llama.cpp would count from it is wrong; it is given here instead.
# The CUDA build runs on another machine: its CPU code is not tuned to this one but built for
# any AVX-512 host (the GPU machines' Sapphire Rapids among them).
NO_AMX="-U__AMX_TILE__ -U__AMX_INT8__ -U__AMX_BF16__"
NATIVE=ON
((CUDA || AVX2)) && NATIVE=OFF
CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=$NATIVE
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    "-DCMAKE_C_FLAGS=$NO_AMX" "-DCMAKE_CXX_FLAGS=$NO_AMX"
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
    -DLLAMA_BUILD_TOOLS=ON
    "-DLLAMA_BUILD_NUMBER=$LLAMA_BUILD" "-DLLAMA_BUILD_COMMIT=${LLAMA_COMMIT:0:9}"
)
if ((CUDA)); then
    # One GPU: no NCCL (its 218 MB library would have to travel to the GPU machine).
    CMAKE_FLAGS+=(-DGGML_CUDA=ON -DGGML_CUDA_NCCL=OFF "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90-real}" -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON
                  -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON)
    [[ -x /usr/local/cuda/bin/nvcc ]] && CMAKE_FLAGS+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
((AVX2)) && CMAKE_FLAGS+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF)
TARGETS=(llama-bench llama-perplexity llama-batched-bench)
if ((SPEC)); then
    CMAKE_FLAGS+=(-DLLAMA_BUILD_EXAMPLES=ON)
    TARGETS=(llama-lookup llama-speculative)
fi

log() { echo "build_llamacpp: $*" >&2; }

# What the binaries were built from and how, as `key: value` lines that compare.py prints under
# its table (flags with spaces quoted, ready to paste).
build_info() {
    local f flags=()
    for f in "${CMAKE_FLAGS[@]}"; do
        if [[ $f == *" "* ]]; then flags+=("\"$f\""); else flags+=("$f"); fi
    done
    echo "source: vendor/llama.cpp of the llama-cpp-python $VERSION sdist"
    echo "cmake: ${flags[*]}"
}

up_to_date() {
    for t in "${TARGETS[@]}"; do [[ -x $BIN/$t ]] || return 1; done
    [[ -f $INFO ]] && [[ "$(cat "$INFO")" == "$(build_info)" ]]
}

fetch_source() {
    if [[ ! -f $SDIST ]]; then
        log "downloading the llama-cpp-python $VERSION sdist"
        python3 -m pip download --no-binary :all: --no-deps "llama-cpp-python==$VERSION" -d "$PEER_DIR" >&2
    fi
    if [[ ! -f $SRC/CMakeLists.txt ]]; then
        log "unpacking $SDIST"
        tar -xzf "$SDIST" -C "$PEER_DIR"
    fi
    # The pinned build number is only right for the pinned commit.
    if command -v git >/dev/null; then
        local head
        head=$(git -C "$SRC" rev-parse HEAD)
        [[ $head == "$LLAMA_COMMIT"* ]] || { log "vendored llama.cpp is $head, expected $LLAMA_COMMIT"; exit 1; }
    fi
}

build() {
    rm -rf "$BUILD"  # a stale cache would keep the old flags
    log "configuring: ${CMAKE_FLAGS[*]}"
    cmake -S "$SRC" -B "$BUILD" "${CMAKE_FLAGS[@]}" >&2
    log "building ${TARGETS[*]} with ${JOBS:-$(nproc)} jobs"
    cmake --build "$BUILD" --target "${TARGETS[@]}" --parallel "${JOBS:-$(nproc)}" >&2
    build_info >"$INFO"
}

main() {
    mkdir -p "$PEER_DIR"
    if up_to_date; then
        log "up to date"
    else
        fetch_source
        local t0=$SECONDS
        build
        log "built in $((SECONDS - t0)) s"
    fi
    "$BIN/${TARGETS[0]}" --version >&2 || true
    echo "$BIN"
}

main "$@"

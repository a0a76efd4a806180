#!/usr/bin/env bash
# Packs what bench/gpu_check.sh needs on a GPU machine that has no network and none of Strata's
# libraries into gpu-bundle.tar.xz, small enough to travel with the working tree:
#   bin/     strata and the test binaries, built here for the GPU (no -march=native; machine code
#            for sm_90 and no PTX, unless CUDA_ARCHS says: each binary carries the kernels, and
#            PTX beside them would not travel)
#   lib/     every library those load that is not the C/C++ runtime or CUDA's own
#   py/      gguf for the GPU machine's Python (DEVICE_PYTHON, default 3.12), which writes the
#            synthetic models there with the numpy, PyYAML and tqdm its image already has
#   models/  a tiny synthetic model's header (its weights read as zeros) whose tokenizer the
#            synthetic models copy, and stories260K.gguf (a tiny trained Llama, 1.2 MB) from
#            ../shared/models/ when it is there; SmolLM2 itself is too large to travel this way
#            (gpu_check.sh looks for it in shared/models/)
#   source_dir  where the test binaries were built (they read fixtures below it)
#
# llama.cpp's CUDA llama-bench (bench/build_llamacpp.sh --cuda) goes into gpu-peer.tar.xz
# (gpu-peer/bin, gpu-peer/lib). Where both archives fit one call (the script says so) they travel
# together and gpu_check.sh unpacks the peer itself; else the peer travels in a call of its own just
# before the check, unpacked there (`tar -xJf gpu-peer.tar.xz`) into gpu-peer/, which the machine
# keeps while it stays warm. Either way gpu_check.sh runs it beside Strata.
#
#   bench/gpu_bundle.sh            # then: run bench/gpu_check.sh gpu-bundle on the GPU machine
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${STRATA_GPU_BUILD:-build-gpu}
OUT=gpu-bundle
# The device tool carries 64 MiB in all, the working tree (tracked and untracked files not
# ignored) included: an archive gets what the tree leaves, less 1 MiB.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
LIMIT_MIB=$((63 - (tree_bytes >> 20)))

log() { echo "gpu_bundle: $*" >&2; }

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_NATIVE=OFF -DSTRATA_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90-real}" >&2
cmake --build "$BUILD" -j "$(nproc)" --target strata strata_unit_tests strata_model_tests >&2

rm -rf "$OUT" "$OUT.tar.xz"
mkdir -p "$OUT"/{bin,lib,py,models}
cp "$BUILD/strata" "$BUILD/tests/strata_unit_tests" "$BUILD/tests/strata_model_tests" "$OUT/bin/"

copy_libs() {  # copy_libs DIR: the libraries DIR/bin/* load that the GPU machine lacks, into DIR/lib
    for lib in $(ldd "$1"/bin/* 2>/dev/null | awk '/=> \// {print $3}' | sort -u); do
        case $(basename "$lib") in
            libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libstdc++.so* | libgcc_s.so* | \
                libcuda.so* | libcudart.so* | libcublas*.so*) ;;
            *) cp -L "$lib" "$1/lib/" ;;
        esac
    done
}
copy_libs "$OUT"

python3 -m pip install --quiet --target "$OUT/py" --python-version "${DEVICE_PYTHON:-3.12}" --only-binary=:all: \
    --no-deps gguf >&2
python3 bench/make_synthetic_gguf.py --shape tiny --type Q8_0 --header-only -o "$OUT/models/tokenizer.gguf" >&2
stories=${STRATA_SHARED:-../shared}/models/stories260K.gguf
if [[ -f $stories ]]; then cp "$stories" "$OUT/models/"; else log "no $stories: the check runs no trained model"; fi
pwd >"$OUT/source_dir"

XZ_OPT="-T0" tar -cJf "$OUT.tar.xz" --sparse "$OUT"
size=$(($(stat -c %s "$OUT.tar.xz") >> 20))
log "$OUT.tar.xz: $size MiB"
((size <= LIMIT_MIB)) || { log "over $LIMIT_MIB MiB: it will not travel"; exit 1; }

# The peer, packed apart (see above); the check runs without it where it is missing or too large.
peer=${STRATA_PEER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/peer}/build-cuda/bin
rm -rf gpu-peer gpu-peer.tar.xz
if [[ -x $peer/llama-bench ]]; then
    mkdir -p gpu-peer/{bin,lib}
    cp "$peer/llama-bench" gpu-peer/bin/
    copy_libs gpu-peer
    XZ_OPT="-T0" tar -cJf gpu-peer.tar.xz gpu-peer
    peer_size=$(($(stat -c %s gpu-peer.tar.xz) >> 20))
    if (($(stat -c %s "$OUT.tar.xz") + $(stat -c %s gpu-peer.tar.xz) <= LIMIT_MIB << 20)); then
        log "gpu-peer.tar.xz: $peer_size MiB (llama.cpp's CUDA llama-bench): both archives travel in one call" \
            "(carry gpu-bundle.tar.xz and gpu-peer.tar.xz; the check unpacks both)"
    else
        log "gpu-peer.tar.xz: $peer_size MiB (llama.cpp's CUDA llama-bench): $((size + peer_size)) MiB with" \
            "$OUT.tar.xz, over $LIMIT_MIB, so it goes in a call of its own just before the check"
        ((peer_size <= LIMIT_MIB)) || { log "gpu-peer.tar.xz is over $LIMIT_MIB MiB: it will not travel"; rm -f gpu-peer.tar.xz; }
    fi
else
    log "no CUDA llama-bench ($peer): bench/build_llamacpp.sh --cuda builds it (about 15 minutes on two cores)"
fi
echo "$OUT.tar.xz"

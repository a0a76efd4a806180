#!/usr/bin/env bash
# Packs what bench/gpu_check.sh needs on a GPU machine that has no network and none of Strata's
# libraries into gpu-bundle.tar.xz, small enough to travel with the working tree:
#   bin/     strata and the test binaries, built here for the GPU (no -march=native, sm_90 unless
#            CUDA_ARCHS says), and llama.cpp's CUDA llama-bench when bench/build_llamacpp.sh --cuda
#            has built it
#   lib/     every library those load that is not the C/C++ runtime or CUDA's own
#   py/      gguf for the GPU machine's Python (DEVICE_PYTHON, default 3.12), which writes the
#            synthetic models there with the numpy, PyYAML and tqdm its image already has
#   models/  a tiny synthetic model's header (its weights read as zeros) whose tokenizer the
#            synthetic models copy, and stories260K.gguf (a tiny trained Llama, 1.2 MB) from
#            ../shared/models/ when it is there; SmolLM2 itself is too large to travel this way
#            (gpu_check.sh looks for it in shared/models/)
#   source_dir  where the test binaries were built (they read fixtures below it)
#
#   bench/gpu_bundle.sh            # then: run bench/gpu_check.sh gpu-bundle on the GPU machine
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${STRATA_GPU_BUILD:-build-gpu}
OUT=gpu-bundle
LIMIT_MIB=60  # the device tool carries 64 MiB in all

log() { echo "gpu_bundle: $*" >&2; }

[[ -f $BUILD/build.ninja ]] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_NATIVE=OFF \
    -DSTRATA_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90}" >&2
cmake --build "$BUILD" -j "$(nproc)" --target strata strata_unit_tests strata_model_tests >&2

rm -rf "$OUT" "$OUT.tar.xz"
mkdir -p "$OUT"/{bin,lib,py,models}
cp "$BUILD/strata" "$BUILD/tests/strata_unit_tests" "$BUILD/tests/strata_model_tests" "$OUT/bin/"
peer=${STRATA_PEER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/peer}/build-cuda/bin
if [[ -x $peer/llama-bench ]]; then
    cp "$peer/llama-bench" "$OUT/bin/"
else
    log "no CUDA llama-bench ($peer): bench/build_llamacpp.sh --cuda builds it (about 25 minutes on two cores)"
fi

for lib in $(ldd "$OUT"/bin/* 2>/dev/null | awk '/=> \// {print $3}' | sort -u); do
    case $(basename "$lib") in
        libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | libstdc++.so* | libgcc_s.so* | \
            libcuda.so* | libcudart.so* | libcublas*.so*) ;;
        *) cp -L "$lib" "$OUT/lib/" ;;
    esac
done

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
echo "$OUT.tar.xz"

#!/usr/bin/env bash
# The CUDA backend's benchmarks (BENCHMARKS.md, section GPU), on a machine with an NVIDIA GPU,
# after the GPU tests. Prints each command before its output.
#   bench/gpu_benchmarks.sh [MODEL_DIR]     (default /tmp/strata-bench-models)
# MODEL_DIR gets llama3-8b-Q4_0.gguf and llama3-8b-Q4_K.gguf from bench/make_synthetic_gguf.py
# (pip's gguf and numpy) when they are missing; SmolLM2 comes from the model cache.
#   1. all resident: pp512/tg128 of SmolLM2 and llama3-8b Q4_0/Q4_K
#   2. partial offload: llama3-8b Q4_0 with --gpu-mem at 25% and 50% of its weights
#   3. CPU attention: batch 16 at depth 8192, --attention cpu against gpu (the plan's
#      prediction is printed under each table)
#   4. throughput: the plan for llama3-70b Q4_0 with 40 GB of GPU memory (strata plan)
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${1:-/tmp/strata-bench-models}
S=build/strata
mkdir -p "$dir"
run() { echo; echo "\$ $*"; "$@"; }

run ctest --test-dir build -L gpu --output-on-failure
run nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv
run "$S" probe
for t in Q4_0 Q4_K; do
    [[ -f $dir/llama3-8b-$t.gguf ]] || run python3 bench/make_synthetic_gguf.py --shape llama3-8b --type "$t" -o "$dir/llama3-8b-$t.gguf"
done

echo; echo "## 1. all resident"
run "$S" bench -r 3
for t in Q4_0 Q4_K; do run "$S" bench -m "$dir/llama3-8b-$t.gguf" -r 3; done

echo; echo "## 2. partial offload"
weights=$(stat -c %s "$dir/llama3-8b-Q4_0.gguf")
for share in 25 50; do
    run "$S" bench -m "$dir/llama3-8b-Q4_0.gguf" -r 3 --gpu-mem $((weights * share / 100)) --show-plan
done

echo; echo "## 3. CPU attention, batch 16 at depth 8192"
for where in cpu gpu; do
    run "$S" bench -m "$dir/llama3-8b-Q4_0.gguf" -p 0 -n 16 -b 16 -d 8192 -c 8320 -r 1 --attention "$where" --show-plan
done

echo; echo "## 4. throughput plan: llama3-70b Q4_0 shape, 40 GB of GPU memory"
run "$S" plan --shape llama3-70b --weight-type Q4_0 --gpu h100-80g --gpu-mem 40G \
    --workload prompt=512,gen=128,objective=throughput

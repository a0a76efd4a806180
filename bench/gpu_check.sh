#!/usr/bin/env bash
# The GPU machine's check, one command from binaries built elsewhere (bench/gpu_bundle.sh), in
# about 8 minutes, leaving one Markdown report (GPU_CHECK_REPORT, default $OUT/gpu_check.md or
# ./gpu_check.md), written as it goes so that a run cut short still reports what it measured:
#   1. nvidia-smi
#   2. every [gpu] test (unit and model); under compute-sanitizer's memcheck and racecheck too
#      with GPU_CHECK_SANITIZE=1 (it needs hardware access that sandboxed machines lack)
#   3. strata probe: the device's own ops measured, so that each plan below is priced from them;
#      the profile is copied beside the report
#   4. greedy tokens on the GPU against the CPU: SmolLM2 (when shared/models/ or the model cache
#      has it), stories260K (a tiny trained Llama the bundle carries) and a synthetic llama3-8b
#      (Q4_0, weights of std 0.2 so that tokens are decided)
#   5. strata bench with every layer on the GPU, with half and with a quarter of the weights'
#      bytes (--gpu-mem) and on the CPU alone, beside llama.cpp's CUDA llama-bench with -ngl 99,
#      16, 8 and 0 on the same file (the synthetic llama3-8b Q4_0), each with the plan's
#      prediction (GPU_CHECK_REPS repetitions, default 2); every layer on the GPU again with
#      activations of one int8 level (--int8-acts); decode at depth 4096; a prompt's passes
#      traced with every layer on the GPU and with a quarter (prefill_*_trace.json.gz, and where
#      their time went in the report: bench/trace_tracks.py); decode steps traced op by op
#      (--no-graphs: each matmul's and the attention's device time, decode_ops_trace.json.gz)
#   6. CPU attention beside the GPU: batch 16 at depth 8192 on a synthetic tinyllama-1.1b, the KV
#      cache in DRAM (--attention cpu, and beside the simulated device on the same host)
#      against on the device (--attention gpu), both traced (*_attention_trace.json.gz)
#   7. 8-layer Q4_K, Q6_K and Q8_0 slices of the llama3-8b, every layer on the GPU, beside llama.cpp
#   8. a mixture of experts (4-layer slice of a synthetic Mixtral 8x7B) with every expert on the
#      host: a prompt with op offload on, off and as the planner chooses, beside llama.cpp's -ot exps=CPU
#   9. the decode kernels' times under Nsight Compute (ncu), with GPU_CHECK_NCU=1
#
#   bench/gpu_check.sh [BUNDLE]     BUNDLE: gpu-bundle (or gpu-bundle.tar.xz, unpacked here)
#
# Without a GPU it says so and exits 77. GPU_CHECK_DEVICE=sim runs every step on the simulated
# device instead, from build/ (a rehearsal of the script on any machine; the numbers mean nothing).
set -uo pipefail
cd "$(dirname "$0")/.."

device=${GPU_CHECK_DEVICE:-cuda}
bundle=${1:-gpu-bundle}
bundle=${bundle%.tar.xz}
report=${GPU_CHECK_REPORT:-${OUT:-.}/gpu_check.md}
work=${GPU_CHECK_WORK:-/tmp/strata-gpu-check}
started=$SECONDS

if [[ $device == cuda ]] && ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no GPU here (nvidia-smi finds none); nothing was checked"
    exit 77
fi
[[ -f $bundle.tar.xz && ! -d $bundle ]] && tar -xJf "$bundle.tar.xz"
if [[ -d $bundle/bin ]]; then
    bin=$bundle/bin
    unit=$bin/strata_unit_tests model=$bin/strata_model_tests
    export LD_LIBRARY_PATH=$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PYTHONPATH=$PWD/$bundle/py${PYTHONPATH:+:$PYTHONPATH}
    tokenizer=$bundle/models/tokenizer.gguf
    # The tests' shared folder: the trained stories260K in place of the random stand-in.
    [[ -f $bundle/models/stories260K.gguf ]] && export STRATA_SHARED=$PWD/$bundle
    # The test binaries read fixtures below the path they were built at.
    src=$(cat "$bundle/source_dir")
    [[ -e $src ]] || { mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; }
else
    bin=build unit=build/tests/strata_unit_tests model=build/tests/strata_model_tests tokenizer=
fi
strata=$bin/strata
# llama.cpp's CUDA llama-bench: unpacked from gpu-peer.tar.xz (carried with the bundle, or by a call just before), else built here.
[[ -f gpu-peer.tar.xz && ! -d gpu-peer ]] && tar -xJf gpu-peer.tar.xz
llama_bench=$PWD/gpu-peer/bin/llama-bench
if [[ -x $llama_bench ]]; then
    export LD_LIBRARY_PATH=$PWD/gpu-peer/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
    llama_bench=${STRATA_PEER_DIR:-$HOME/.cache/strata/peer}/build-cuda/bin/llama-bench
fi
mkdir -p "$work" "$(dirname "$report")"
# The rehearsal on the simulated device checks the steps, not the speed: small models, short runs.
layers=() slice_layers=8 reps=${GPU_CHECK_REPS:-2} n_gen=128 n_prompt=512 depth=8192
[[ $device == sim ]] && layers=(--n-layer 2) slice_layers=2 reps=1 n_gen=16 n_prompt=64 depth=256

smollm2=
for f in shared/models/SmolLM2-135M-Instruct.Q4_1.gguf ../shared/models/SmolLM2-135M-Instruct.Q4_1.gguf \
    "${XDG_CACHE_HOME:-$HOME/.cache}/strata/models/SmolLM2-135M-Instruct.Q4_1.gguf"; do
    [[ -f $f ]] && { smollm2=$f; break; }
done

# ---- the report ----
echo "# GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')" >"$report"
echo >>"$report"
echo "Device \`$device\`, binaries from \`$bin\`, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)." >>"$report"
section() { printf '\n## %s\n\n' "$1" >>"$report"; echo "gpu_check: $1 ($((SECONDS - started)) s)" >&2; }
note() { echo "$*" >>"$report"; }
# run LIMIT CMD...: the command and its output (the last 60 lines) in a block, its exit status after.
run() {
    local limit=$1 rc
    shift
    local log=$work/last.log
    timeout "$limit" "$@" >"$log" 2>&1
    rc=$?
    {
        echo '```'
        echo "\$ $*"
        # Progress meters and info lines say nothing a reader of the report needs.
        grep -v -e '^\[20[0-9-]* [0-9:.]*\] \[info\]' -e 'ETA ' "$log" | tail -n 60
        echo '```'
        if ((rc == 124)); then echo "**timed out after ${limit} s**"; elif ((rc == 77)); then echo "(skipped)"; elif ((rc != 0)); then echo "**exit $rc**"; fi
    } >>"$report"
    return $rc
}

section "1. The card"
if [[ $device == cuda ]]; then
    run 20 nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.max.memory,driver_version --format=csv
    run 20 nvidia-smi
else
    note "(simulated device: no card)"
fi

section "2. Tests"
tag="[gpu]"
[[ $device == sim ]] && tag="[device]"
run 120 "$unit" "$tag" -r compact
run 150 "$model" "$tag" -r compact
if [[ $device == cuda && ${GPU_CHECK_SANITIZE:-0} == 1 ]] && command -v compute-sanitizer >/dev/null; then
    run 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$unit" "[gpu]" -r compact
    run 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$unit" "cuda device: attention*,cuda device: matmul*" -r compact
else
    note "compute-sanitizer: not run ($([[ $device == cuda ]] && echo 'GPU_CHECK_SANITIZE=1 runs it' || echo 'simulated device'))."
fi

section "3. The probe"
# Plans below are priced from the device's own ops measured here, not from the catalog.
if [[ $device == cuda ]]; then
    run 120 "$strata" probe
    # Beside the report: the profile every plan below is priced from, for planning on other machines.
    cp "${XDG_CACHE_HOME:-$HOME/.cache}/strata/hardware.json" "$(dirname "$report")/hardware.json" 2>/dev/null &&
        note "The profile: \`hardware.json\` beside this report (\`strata plan --hw hardware.json\`)."
fi
[[ $device == sim ]] && note "(simulated device: plans use the simulated device's figures)"

section "4. Greedy tokens on the device against the CPU"
synth=$work/llama3-8b-Q4_0-std0.2.gguf
make_synth() {  # make_synth OUT ARGS...: a synthetic model unless it is there
    local out=$1
    shift
    [[ -f $out ]] || run 240 python3 bench/make_synthetic_gguf.py "$@" ${tokenizer:+--tokenizer-from "$tokenizer"} -o "$out"
}
make_synth "$synth" --shape llama3-8b --type Q4_0 --std 0.2 "${layers[@]}"
same_tokens() {  # same_tokens MODEL: 32 greedy tokens on the device and on the CPU
    local m=$1 a=$work/device.json b=$work/cpu.json args
    args=(generate -m "$m" -p "The capital of France is" -n 32 --temp 0 --json)
    note "### $(basename "$m")"
    if ! timeout 180 "$strata" "${args[@]}" --device "$device" >"$a" 2>"$work/device.err"; then
        note '```'; tail -n 20 "$work/device.err" >>"$report"; note '```'; note "**the device run failed**"
        return
    fi
    timeout 180 "$strata" "${args[@]}" --device cpu >"$b" 2>/dev/null || { note "**the CPU run failed**"; return; }
    python3 - "$a" "$b" >>"$report" <<'EOF'
import json, sys
dev, cpu = (json.load(open(p))["tokens"] for p in sys.argv[1:3])
same = next((i for i, (x, y) in enumerate(zip(dev, cpu)) if x != y), min(len(dev), len(cpu)))
print(f"**{same} of {len(cpu)} tokens equal** (device {dev[:8]}..., CPU {cpu[:8]}...)")
EOF
}
if [[ -n $smollm2 ]]; then same_tokens "$smollm2"; else note "SmolLM2: not on this machine (put it in shared/models/)."; fi
stories=${STRATA_SHARED:-../shared}/models/stories260K.gguf
if [[ -f $stories ]]; then same_tokens "$stories"; else note "stories260K: not here."; fi
[[ -f $synth ]] && same_tokens "$synth"

section "5. Speed beside llama.cpp"
weights_bytes() { stat -c %s "$1"; }
bench_pair() {  # bench_pair MODEL NGL SHARE: llama-bench -ngl NGL, strata with SHARE% of the weights' bytes (0: the CPU)
    local m=$1 ngl=$2 share=$3 mem
    mem=$(($(weights_bytes "$m") * share / 100 + (256 << 20)))
    if [[ -x $llama_bench && $device == cuda ]]; then
        run 120 "$llama_bench" -m "$m" -ngl "$ngl" -p "$n_prompt" -n "$n_gen" -r "$reps" -t "$(nproc)"
    else
        note "llama-bench (CUDA): not here (bench/build_llamacpp.sh --cuda and bench/gpu_bundle.sh make gpu-peer.tar.xz, which this check unpacks where the call carried it)."
    fi
    if ((share >= 100)); then
        run 150 "$strata" bench -m "$m" -p "$n_prompt" -n "$n_gen" -r "$reps" --device "$device"
    elif ((share == 0)); then
        run 150 "$strata" bench -m "$m" -p "$n_prompt" -n "$n_gen" -r "$reps" --device cpu
    else
        run 150 "$strata" bench -m "$m" -p "$n_prompt" -n "$n_gen" -r "$reps" --device "$device" --gpu-mem "$mem" --show-plan
    fi
}
if [[ -f $synth ]]; then
    note "### llama3-8b Q4_0 (synthetic, std 0.2)"
    bench_pair "$synth" 99 100
    bench_pair "$synth" 16 50
    bench_pair "$synth" 8 25
    bench_pair "$synth" 0 0
    note "### Every layer on the GPU, activations of one int8 level (llama.cpp's q8_1) instead of two"
    run 150 "$strata" bench -m "$synth" -p "$n_prompt" -n "$n_gen" -r "$reps" --device "$device" --int8-acts
    note "### tg64 at depth 4096, every layer on the GPU"
    [[ -x $llama_bench && $device == cuda ]] && run 120 "$llama_bench" -m "$synth" -ngl 99 -p 0 -n 64 -d 4096 -r 2
    run 150 "$strata" bench -m "$synth" -p 0 -n 64 -d 4096 -c 4352 -r "$reps" --device "$device"
    note "### A prompt's passes traced: every layer on the GPU, and a quarter of the weights (op offload)"
    for share in 100 25; do
        trace=$(dirname "$report")/prefill_${share}_trace.json
        gpu_mem=()
        ((share < 100)) && gpu_mem=(--gpu-mem $(($(weights_bytes "$synth") * share / 100 + (256 << 20))) --show-plan)
        run 150 "$strata" bench -m "$synth" -p "$n_prompt" -n 0 -r 1 --device "$device" "${gpu_mem[@]}" --trace "$trace"
        # Where the pass's time went, in the report even where the trace does not come back.
        [[ -f $trace ]] && { python3 bench/trace_tracks.py "$trace"; echo; } >>"$report" && gzip -f "$trace"
    done
    note "### Decode steps traced op by op (--no-graphs), every layer on the GPU: each op's device time"
    trace=$(dirname "$report")/decode_ops_trace.json
    run 150 "$strata" bench -m "$synth" -p 0 -n 32 -r 1 --device "$device" --no-graphs --trace "$trace"
    [[ -f $trace ]] && { python3 bench/trace_tracks.py "$trace" --top 30; echo; } >>"$report" && gzip -f "$trace"
fi
[[ -n $smollm2 ]] && { note "### SmolLM2-135M Q4_1"; bench_pair "$smollm2" 99 100; }

section "6. CPU attention beside the GPU: batch 16 at depth $depth"
small=$work/tinyllama-1.1b-Q4_0.gguf
make_synth "$small" --shape tinyllama-1.1b --type Q4_0 "${layers[@]}"
if [[ -f $small ]]; then
    for where in cpu gpu; do
        # Each run's trace is kept beside the report: the CPU's attention per sub-batch beside the
        # device's streams, and the device's own ops when it attends.
        trace=(--trace "$(dirname "$report")/${where}_attention_trace.json")
        run 150 "$strata" bench -m "$small" -p 0 -n 16 -b 16 -d "$depth" -c $((depth + 128)) -r 1 --device "$device" \
            --attention "$where" --show-plan -v "${trace[@]}"
    done
    # Compressed: the device-attention run's trace (the 16 prompts' fill too) was over the 16 MiB a
    # file of the report may take.
    gzip -f "$(dirname "$report")"/*_attention_trace.json 2>/dev/null
    # The same CPU attention beside the simulated device on this host: slow there too, the host
    # is the cause; slow only beside the card, the CUDA path is.
    [[ $device == cuda ]] && run 150 "$strata" bench -m "$small" -p 0 -n 16 -b 16 -d "$depth" -c $((depth + 128)) -r 1 \
        --device sim --gpu-mem 4G --attention cpu --show-plan
fi

section "7. Other weight types: 8-layer slices"
for t in Q4_K Q6_K Q8_0; do
    slice=$work/llama3-8b-$t-${slice_layers}layers.gguf
    make_synth "$slice" --shape llama3-8b --type "$t" --n-layer "$slice_layers"
    [[ -f $slice ]] && { note "### llama3-8b $t, $slice_layers layers (synthetic)"; bench_pair "$slice" 99 100; }
done

section "8. A mixture of experts' experts on the host: op offload of a prompt"
# Every layer's attention on the device and every routed expert on the host (llama.cpp's
# -ot exps=CPU); a prompt's passes copy each layer in and compute its experts on the device
# (--op-offload on), or leave them to the CPU (off); auto says what the planner chose.
# Four layers (3.2 GB; one on the simulated device), one repetition each: a short section.
moe_layers=$((slice_layers / 2))
moe=$work/mixtral-8x7b-Q4_0-${moe_layers}layers.gguf
make_synth "$moe" --shape mixtral-8x7b --type Q4_0 --n-layer "$moe_layers"
if [[ -f $moe ]]; then
    [[ -x $llama_bench && $device == cuda ]] && run 120 "$llama_bench" -m "$moe" -ngl 99 -ot exps=CPU -p "$n_prompt" -n 16 -r 1 -t "$(nproc)"
    for mode in on off auto; do
        run 120 "$strata" bench -m "$moe" -p "$n_prompt" -n 16 -r 1 --device "$device" --ot exps=dram --op-offload "$mode" --show-plan
    done
fi

section "9. Decode kernels under Nsight Compute"
if [[ $device == cuda && ${GPU_CHECK_NCU:-0} == 1 ]] && command -v ncu >/dev/null && [[ -f $synth ]]; then
    # The clocks as they run (ncu's own clock control failed to profile a kernel on the H200).
    run 180 ncu --clock-control none --kernel-name regex:'matvec|attention|prepare_input|rms_norm|rope' --launch-skip 200 --launch-count 40 \
        --section SpeedOfLight --csv "$strata" generate -m "$synth" -p "Hello" -n 4 --temp 0 --device cuda
else
    note "ncu: not run ($([[ $device == cuda ]] && echo 'GPU_CHECK_NCU=1 runs it, where ncu is installed and reads the counters' || echo 'simulated device'))."
fi

note ""
note "Finished in $((SECONDS - started)) s."
echo "gpu_check: report in $report ($((SECONDS - started)) s)" >&2

#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/kernel_shapes.h"
#include "planner/ring_pipeline.h"

namespace strata::planner {

namespace {
constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute),
              H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H),
              N = static_cast<int>(Stream::Nvme), R = static_cast<int>(Stream::Dram);
constexpr int kGpuTier = 0, kDramTier = 1, kNvmeTier = 2;
int tier_index(Tier t) { return t == Tier::Gpu ? kGpuTier : t == Tier::Dram ? kDramTier : kNvmeTier; }
// Per decode step outside the layers: sampling and the host's turn-around.
constexpr double kStepOverheadS = 50e-6;
// Tokens per matmul up to which the CPU kernels take the one-pass GEMV path.
constexpr double kCpuGemvTokens = static_cast<double>(strata::kCpuGemvTokens);
// Decode rows per device matmul call (each row's bits as alone): a batch's step reads the
// device's weights once per this many sequences.
constexpr double kGpuDecodeRows = static_cast<double>(kDeviceRowWiseRows);
}  // namespace

Cost& Cost::operator+=(const Cost& o) {
    for (int i = 0; i < kNumStreams; ++i) prefill[i] += o.prefill[i], decode[i] += o.decode[i];
    prefill_overhead += o.prefill_overhead;
    decode_overhead += o.decode_overhead;
    decode_overlapped += o.decode_overlapped;
    for (int i = 0; i < 3; ++i) bytes[i] += o.bytes[i];
    gpu_staging += o.gpu_staging;
    dram_staging += o.dram_staging;
    return *this;
}

Cost Cost::scaled(double f) const {
    Cost c = *this;
    for (int i = 0; i < kNumStreams; ++i) c.prefill[i] *= f, c.decode[i] *= f;
    c.prefill_overhead *= f;
    c.decode_overhead *= f;
    c.decode_overlapped *= f;
    for (auto& b : c.bytes) b *= f;
    c.gpu_staging *= f;
    c.dram_staging *= f;
    return c;
}

CostModel::CostModel(const ModelShape& shape, const HardwareProfile& hw, const Workload& wl, const Policy& policy,
                     const RuntimeLimits& limits)
    : shape_(shape), hw_(hw), wl_(wl), policy_(policy), has_gpu_(hw.has_gpu()), limits_(limits) {
    // A decode step reads every weight and the whole KV cache; when that is not much more than
    // the cache holds, part of it is still there from the step before (CpuProfile::reuse).
    const double step_bytes = static_cast<double>(shape.total_weight_bytes()) +
                              policy.batch * shape.attended_positions(wl.prompt_len + wl.gen_len / 2.0) *
                                  shape.kv_bytes_per_token(policy.kv_type) * shape.n_layer;
    const double reuse = hw.cpu.reuse(step_bytes);
    // What the cache holds of a step lifts the rate threads read DRAM at, not the rate they take
    // weights in: a thread decodes from the cache no faster than its measured rate (one thread
    // beside the simulated device decoded SmolLM2's layers at its 15 GB/s from DRAM where the
    // reuse priced 28). 0: not measured.
    const KernelRate* cpu_rate = rate_for(hw.cpu.rates, shape.weight_type);
    const double thread_gbps = cpu_rate ? cpu_rate->gemv_thread_at(shape.n_embd) : 0;
    auto thread_bound = [&](double rate, double threads) {
        return thread_gbps > 0 ? std::min(rate, threads * thread_gbps * 1e9) : rate;
    };
    if (has_gpu_) {
        gpu_bw_ = hw.gpu->mem_gbps * 1e9;
        gpu_flops_ = hw.gpu->fp16_tflops * 1e12;
        h2d_ = hw.gpu->h2d_gbps * 1e9;
        d2h_ = hw.gpu->d2h_gbps * 1e9;
        gpu_launch_s_ = gpu_prefill_launch_s_ = hw.gpu->launch_overhead_us * 1e-6;
        hop_s_ = hw.gpu->handoff_us * 1e-6;
        // A device whose ops the probe measured (the simulated one, or a probed GPU) is priced
        // from them: its matmuls by weight type and rows a call, a layer's launches as its ops
        // and calls cost, its attention from the measured depths.
        const DeviceOps* o = ops();
        if (const KernelRate* r = o ? rate_for(o->rates, shape.weight_type) : nullptr) {
            dev_rate_ = *r;
            gpu_bw_ = dev_rate_->gemv_at(shape.n_embd) * 1e9;
            gpu_flops_ = dev_rate_->gemm_at(shape.n_embd) * 1e9;
            dev_weight_pass_ = (dev_rate_->pack_gbps > 0 ? std::min(dev_rate_->pack_gbps, dev_rate_->gemv_gbps)
                                                         : dev_rate_->gemv_gbps) * 1e9;
            gpu_launch_s_ = device_layer_launch_s(o->op_overhead_us, true);
            gpu_prefill_launch_s_ = device_layer_launch_s(o->op_overhead_us, false);
        }
        // The simulated device's weights are host memory, read through the host's caches (its
        // rates were measured, or taken from the CPU's, on a matrix past them): as the CPU's,
        // part of a step that fits them is still there.
        if (hw.gpu->sim_threads > 0) {
            gpu_bw_ = thread_bound(gpu_bw_ * reuse, hw.gpu->sim_parallelism());
            dev_weight_pass_ *= reuse;
        }
    }
    // The cores that run a decode matmul read its weights themselves: from DRAM no faster than
    // DRAM reads (a probe's GEMV above that had part of its matrix in a cache); what a step
    // finds still cached is the reuse below.
    if (cpu_rate) cpu_rate_ = *cpu_rate;
    const double gemv = hw.cpu.gemv_gbps_for(shape.weight_type, shape.n_embd);
    cpu_gemv_ = (hw.dram.read_gbps > 0 ? std::min(gemv, hw.dram.read_gbps) : gemv) * 1e9;
    cpu_gemm_ = hw.cpu.gemm_gflops_for(shape.weight_type, shape.n_embd) * 1e9;
    // A matmul of many tokens passes over the weights once (packing tiles) at the slower of the
    // packing rate and the rate they stream from memory.
    const double pack = hw.cpu.pack_gbps_for(shape.weight_type) * 1e9;
    pack_measured_ = pack > 0;
    // q/k/v, gate/up and the output (as wide as the queries) read rows of the embedding's
    // width, down rows of the feed-forward's; the output head's rows are the embedding's.
    const double e = shape.n_embd, q = double(shape.n_head) * shape.head_dim;
    cpu_layer_calls_s_ = 2 * hw.cpu.call_s_for(shape.weight_type, e) + hw.cpu.call_s_for(shape.weight_type, q) +
                         hw.cpu.call_s_for(shape.weight_type, shape.n_ff);
    cpu_call_s_ = hw.cpu.call_s_for(shape.weight_type, e);
    cpu_weight_pass_ = pack_measured_ ? std::min(pack, cpu_gemv_) : cpu_gemv_;
    cpu_untile_ = hw.cpu.untile_gbps_for(shape.weight_type) * 1e9;
    cpu_gemv_ = thread_bound(cpu_gemv_ * reuse, hw.cpu.n_threads);
    cpu_weight_pass_ *= reuse;
    cpu_attn_bw_ = hw.cpu.attention_gbps * 1e9;
    cpu_attn_flops_ = hw.cpu.attention_gflops * 1e9;
    cpu_sync_s_ = hw.cpu.layer_overhead_us * 1e-6;
    threads_ = std::max(1, hw.cpu.n_threads);
    dram_bw_ = hw.dram.read_gbps * 1e9;
    nvme_r_ = hw.nvme.read_gbps * 1e9;
    nvme_w_ = hw.nvme.write_gbps * 1e9;
    file_r_ = hw.nvme.model_file_gbps_at(0) * 1e9;
    B_ = policy.batch;
    m_ = policy.n_micro;
    mb_ = B_ / m_;
    rows_d_ = B_ * wl.decode_rows;
    P_ = wl.prompt_len;
    passes_ = m_ * std::max(1.0, std::ceil(B_ * P_ / m_ / ModelShape::kPassRows));
    pass_rows_ = B_ * P_ / passes_;
    // Decode step t (1 .. gen_len-1) attends to prompt_len + t positions (a window layer to its
    // window's: averaged over the layers).
    ctx_avg_ = shape.attended_positions(wl.prompt_len + wl.gen_len / 2.0);  // read per step
    ctx_max_ = wl.kv_positions();                                           // held
    kvb_ = shape.kv_bytes_per_token(policy.kv_type);
}

bool CostModel::allowed(WeightOption o) const {
    return device_of(o) == Device::Cpu ? !(limits_.gpu_layers_only && has_gpu_) : has_gpu_;
}

bool CostModel::allowed(KvOption o) const {
    // A device plan whose CPU attends keeps every layer's KV in the host's cache, as the device
    // runtime does (KvPlacement::HostCpuAttention): KV on the device is another policy's plan.
    if ((!has_gpu_ || policy_.cpu_attention) && tier_of(o) == Tier::Gpu) return false;
    if (limits_.layers_only_on_nvme && tier_of(o) == Tier::Nvme) return false;
    if (!is_recompute(o)) return true;
    return policy_.recompute && !(limits_.recompute_on_gpu_only && tier_of(o) != Tier::Gpu);
}

Device CostModel::attention_device(KvOption o) const {
    if (tier_of(o) == Tier::Gpu) return Device::Gpu;
    return !has_gpu_ || policy_.cpu_attention ? Device::Cpu : Device::Gpu;
}

Cost CostModel::weights_cost(const WeightsRead& w, double tok_d, double tok_p, WeightOption o, bool is_layer) const {
    const double W = w.stored, Wd = w.decode_read, Wp = w.prefill_read;
    const double F = 2.0 * w.params;  // flops per token
    Cost c;
    c.bytes[tier_index(tier_of(o))] = W;
    // Streaming to the GPU: the bytes cross DRAM and PCIe once per pass (FlexGen's zig-zag
    // order lets every micro-batch use them); from NVMe they land in DRAM first.
    // Through the ring: at the model file's rate with the ring's reads in flight, not at the probe's deepest.
    const double ring = limits_.ring_inflight_bytes(W);
    const double nvme_r = hw_.nvme.model_file_gbps_at(ring) * 1e9;
    auto stream_in = [&](std::array<double, kNumStreams>& s, bool from_nvme, double times) {
        s[H] += times * W / h2d_;
        s[G] += times * sim_copy_s(W);
        s[R] += times * W / dram_bw_;
        if (from_nvme) s[N] += times * W / nvme_r, s[R] += times * W / dram_bw_;
    };
    const bool from_nvme = tier_of(o) == Tier::Nvme;
    if (device_of(o) == Device::Gpu) {
        c.decode[G] = m_ * gpu_matmul_s(tok_d / m_, Wd, F, true);
        c.prefill[G] = passes_ * gpu_matmul_s(tok_p / passes_, Wp, F, false);
        c.decode_overhead = is_layer ? m_ * gpu_launch_s_ : 0;
        c.prefill_overhead = is_layer ? passes_ * gpu_prefill_launch_s_ : 0;
        // The simulated device's norms, RoPE, SwiGLU and adds are the CPU's, on its threads.
        if (is_layer && hw_.gpu->sim_threads > 0) {
            c.decode[G] += m_ * cpu_vector_s(tok_d / m_, hw_.gpu->sim_parallelism());
            c.prefill[G] += passes_ * cpu_vector_s(tok_p / passes_, hw_.gpu->sim_parallelism());
        }
        if (o != WeightOption::Gpu) {
            stream_in(c.decode, from_nvme, 1);
            stream_in(c.prefill, from_nvme, passes_ / m_);  // the micro-batches share each pass's copy
            c.gpu_staging = 2 * W;
        }
    } else {
        // The CPU reads the weights in place once per micro-batch. Up to 4-8 tokens (by type)
        // the kernels use each weight block at once for every token, a call taking the probe's
        // measured multiple of one token's time; beyond, they pack weight tiles and run the
        // GEMM kernels, and the same cores that read the weights do the arithmetic, so the two
        // add up instead of overlapping (measured: BENCHMARKS.md, a batch of 8). Unprobed: up
        // to 4 tokens the longer of the read and the arithmetic.
        const double tok_mb = tok_d / m_;
        const double rows_scale = cpu_rate_ ? cpu_rate_->rows_time_scale(tok_mb, shape_.n_embd) : 0;
        const bool per_token_calls = rows_scale > 0 || tok_mb <= kCpuGemvTokens;
        c.decode[C] = m_ * (rows_scale > 0                ? rows_scale * Wd / cpu_gemv_
                            : tok_mb <= kCpuGemvTokens ? std::max(tok_mb * F / cpu_gemm_, Wd / cpu_gemv_)
                                                        : tok_mb * F / cpu_gemm_ + Wd / cpu_weight_pass_);
        if (per_token_calls) c.decode[C] += m_ * (is_layer ? cpu_layer_calls_s_ : cpu_call_s_);
        c.decode[R] = m_ * Wd / dram_bw_;
        if (is_layer) c.decode[C] += m_ * cpu_vector_s(tok_mb, threads_), c.decode_overhead = m_ * cpu_loops_s(tok_mb);
        if (from_nvme) c.decode[N] += W / nvme_r, c.decode[R] += W / dram_bw_;
        // Prefill too runs on the CPU, where the plan put the matmuls (with a device as well:
        // the runtime's layer schedule does not depend on the pass).
        c.prefill[C] = pack_measured_ ? tok_p * F / cpu_gemm_ + passes_ * Wp / cpu_weight_pass_
                                      : passes_ * std::max(tok_p / passes_ * F / cpu_gemm_, Wp / cpu_gemv_);
        c.prefill[R] = passes_ * Wp / dram_bw_;
        if (from_nvme) c.prefill[N] += passes_ / m_ * W / nvme_r, c.prefill[R] += passes_ / m_ * W / dram_bw_;
        if (is_layer)
            c.prefill[C] += passes_ * cpu_vector_s(tok_p / passes_, threads_), c.prefill_overhead = passes_ * cpu_loops_s(tok_p / passes_);
        if (has_gpu_) {
            // Hidden states hop to the CPU and back around this layer's matmuls.
            const double hop_d = tok_d * shape_.n_embd * 4.0, hop_p = tok_p * shape_.n_embd * 4.0;
            c.decode[H] += hop_d / h2d_;
            c.decode[D] += hop_d / d2h_;
            c.prefill[H] += hop_p / h2d_;
            c.prefill[D] += hop_p / d2h_;
            // The hop to the host and back; with CPU attention, layer_kv prices it.
            if (is_layer && !policy_.cpu_attention) c.decode_overhead += m_ * hop_s_, c.prefill_overhead += passes_ * hop_s_;
        }
    }
    if (from_nvme) c.dram_staging = 2 * W;
    return held_apart(c, is_layer);
}

double CostModel::gpu_matmul_s(double tokens, double bytes, double flops_per_token, bool decode) const {
    const double calls = decode ? std::ceil(tokens / kGpuDecodeRows) : 1;
    if (!dev_rate_) return std::max(tokens * flops_per_token / gpu_flops_, calls * bytes / gpu_bw_);
    const double rows = tokens / calls;
    // Measured: one row a call, four, eight and sixteen; between them the time of a call grows
    // linearly (KernelRate::rows_time_scale).
    if (const double scale = decode && rows <= kGpuDecodeRows ? dev_rate_->rows_time_scale(rows, shape_.n_embd, kGpuDecodeRows) : 0;
        scale > 0)
        return calls * scale * bytes / gpu_bw_;
    // A call of many rows passes over its weights, then computes: the two add up.
    if (rows > kCpuGemvTokens) return tokens * flops_per_token / gpu_flops_ + calls * bytes / dev_weight_pass_;
    return std::max(tokens * flops_per_token / gpu_flops_, calls * bytes / gpu_bw_);
}

double CostModel::sim_copy_s(double bytes) const {
    // The simulated device copies with memcpy on a thread of its own, which takes a core from its
    // ops or the host's layers where their threads fill the cores (a GPU's copy engine does not):
    // priced as the device's time.
    if (!has_gpu_ || hw_.gpu->sim_threads <= 0 || hw_.cpu.n_threads + hw_.gpu->sim_threads < hw_.cpu.n_cores) return 0;
    return bytes / (hw_.dram.copy_gbps * 1e9);
}

CostModel::WeightsRead CostModel::layer_read(int layer) const {
    const LayerShape& l = shape_.layers.at(static_cast<size_t>(layer));
    return {static_cast<double>(l.weight_bytes), shape_.read_bytes(l, rows_d_ / m_), shape_.read_bytes(l, pass_rows_),
            shape_.active_matmul_params(l)};
}

Cost CostModel::layer_weights(int layer, WeightOption o) const {
    const WeightsRead w = layer_read(layer);
    Cost c = weights_cost(w, rows_d_, B_ * P_, o, true);
    if (limits_.op_offload && has_gpu_ && device_of(o) == Device::Cpu && pass_rows_ > kCpuGemvTokens) {
        // Copied and computed on the device, when its longest stream is shorter than the CPU's.
        const Cost dev = op_offloaded(layer, o);
        auto pass_s = [](const Cost& k) { return *std::max_element(k.prefill.begin(), k.prefill.end()) + k.prefill_overhead; };
        if (pass_s(dev) < pass_s(c)) c.prefill = dev.prefill, c.prefill_overhead = dev.prefill_overhead;
    }
    return c;
}

Cost CostModel::op_offloaded(int layer, WeightOption cpu_option) const {
    const WeightsRead w = layer_read(layer);
    // Streamed, or held in tiles the CPU cannot give back (no rate measured: Q8_K's, a catalog
    // CPU, a profile from before it was probed): read from the file as the runtime then does.
    if (tier_of(cpu_option) == Tier::Nvme || cpu_untile_ <= 0)
        return weights_cost(w, rows_d_, B_ * P_, WeightOption::NvmeToGpu, true);
    // Rebuilt on the CPU's threads (idle, as the device computes the pass), its matrices copied
    // as they become ready: the copy goes no faster than the rebuild (nor the first matrix's
    // rebuild and the last one's copy, which this leaves out).
    Cost c = weights_cost(w, rows_d_, B_ * P_, WeightOption::DramToGpu, true);
    c.prefill[H] = std::max(c.prefill[H], passes_ / m_ * w.stored / cpu_untile_);  // shared as the copy
    return c;
}

double CostModel::op_offload_copy_s(int layer, WeightOption cpu_option) const {
    const Cost c = op_offloaded(layer, cpu_option);
    return std::max(c.prefill[H], c.prefill[N]) + passes_ / m_ * sim_copy_s(layer_read(layer).stored);
}

Cost CostModel::output(WeightOption o) const {
    // Logits are needed for the last prompt position only: the head runs in the passes that hold
    // a sequence's last row (a micro-batch's sequences, or its passes where fewer).
    const double W = static_cast<double>(shape_.output_bytes);
    CostModel head(*this);
    head.passes_ = m_ * std::min(mb_, passes_ / m_);
    head.pass_rows_ = B_ / head.passes_;
    Cost c = head.weights_cost({W, W, W, static_cast<double>(shape_.output_matmul_params)}, rows_d_, B_, o, false);
    if (limits_.head_on_device && limits_.dram_held_apart) c.bytes[kGpuTier] = 0;  // the device's working set
    return c;
}

Cost CostModel::layer_kv(int, KvOption o) const { return kv_cost(o, attention_device(o), has_gpu_); }

Cost CostModel::layer_kv_beside(int layer, KvOption o, Device weights) const {
    if (has_gpu_ && weights == Device::Cpu && !is_recompute(o))
        return kv_cost(tier_of(o) == Tier::Gpu ? KvOption::Dram : o, Device::Cpu, false);
    return layer_kv(layer, o);
}

Cost CostModel::placed_layer(const Plan& plan, const LayerPlacement& l) const {
    Cost c = placed_weights(plan, l);
    // A mixture's attention on the device attends there to its KV, its feed-forward on the host.
    c += plan.experts.attention_on_gpu ? layer_kv(l.layer, l.kv) : layer_kv_beside(l.layer, l.kv, device_of(l.weights));
    return c;
}

Cost CostModel::embedding(WeightOption o) const {
    Cost c;
    const double E = static_cast<double>(shape_.embd_bytes);
    c.bytes[tier_index(tier_of(o))] = E;
    const double row = shape_.n_embd * 4.0;
    if (o != WeightOption::Gpu && has_gpu_) c.decode[H] = rows_d_ * row / h2d_, c.prefill[H] = B_ * P_ * row / h2d_;
    if (tier_of(o) == Tier::Nvme) {
        // One 4 KiB read per token looked up.
        c.decode[N] = rows_d_ * 4096.0 / nvme_r_;
        c.prefill[N] = B_ * P_ * 4096.0 / nvme_r_;
    }
    return held_apart(c, false);
}

Cost CostModel::hidden(HiddenOption o) const {
    Cost c;
    const double h_pre = B_ * P_ * shape_.n_embd * 2.0, h_dec = rows_d_ * shape_.n_embd * 2.0;
    if (o == HiddenOption::Gpu) {
        // The device runtime runs a prompt in passes of a few hundred tokens whose hidden states
        // are its working set, held apart from the plan's GPU budget as its DRAM is.
        c.bytes[kGpuTier] = limits_.dram_held_apart ? 0 : h_pre;
        return held_apart(c, false);
    }
    c.bytes[kDramTier] = h_pre;
    if (!has_gpu_) return held_apart(c, false);
    // Every layer fetches its input and returns its output.
    const double L = shape_.n_layer;
    c.prefill[H] = L * h_pre / h2d_, c.prefill[D] = L * h_pre / d2h_, c.prefill[R] = L * 2 * h_pre / dram_bw_;
    c.decode[H] = L * h_dec / h2d_, c.decode[D] = L * h_dec / d2h_, c.decode[R] = L * 2 * h_dec / dram_bw_;
    c.gpu_staging = 2 * std::min(mb_ * P_, ModelShape::kPassRows) * shape_.n_embd * 2.0;  // a pass's rows in and out
    return held_apart(c, false);
}

Cost CostModel::fixed() const {
    Cost c;
    // Causal prefill attention: position i attends to i + 1 positions.
    const double attn = shape_.n_layer * B_ * P_ * (P_ + 1) / 2 * shape_.attention_flops_per_position();
    // The largest working set of one micro-batch's prefill, which runs in passes.
    const double ws = shape_.prefill_working_set_bytes(mb_ * P_, mb_);
    if (has_gpu_) {
        c.prefill[G] = sim_attention() ? cpu_prefill_attention_s(hw_.gpu->sim_parallelism()) : attn / gpu_flops_;
        c.prefill[D] = B_ * shape_.n_vocab * 4.0 / d2h_;
        c.decode[D] = rows_d_ * shape_.n_vocab * 4.0 / d2h_;
        c.bytes[kGpuTier] = ws;
    } else {
        c.prefill[C] = hw_.cpu.attention_tile ? cpu_prefill_attention_s(threads_) : attn / cpu_attn_flops_;
        c.bytes[kDramTier] = ws;
    }
    // A step's inputs go up and its logits come down: the host waits for the device twice.
    c.decode_overhead = kStepOverheadS + hop_s_;
    return c;
}

PhaseTimes CostModel::phase_time(Phase ph, const Cost& total) const {
    const auto& s = ph == Phase::Prefill ? total.prefill : total.decode;
    PhaseTimes p;
    p.stream_s = s;
    p.overhead_s = ph == Phase::Prefill ? total.prefill_overhead : total.decode_overhead;
    double compute = 0;
    for (int chain = 0; chain < compute_chains(ph); ++chain) compute = std::max(compute, compute_chain(ph, total, chain));
    p.time_s = compute;
    p.bottleneck = s[G] >= s[C] ? Stream::GpuCompute : Stream::CpuCompute;
    for (int i : {H, D, N, R})
        if (s[i] > p.time_s) p.time_s = s[i], p.bottleneck = static_cast<Stream>(i);
    return p;
}

double CostModel::compute_chain(Phase ph, const Cost& c, int chain) const {
    const bool decode = ph == Phase::Decode;
    const auto& s = decode ? c.decode : c.prefill;
    const double overhead = decode ? c.decode_overhead : c.prefill_overhead;
    // The CPU attention that overlaps the device's matmuls, and the CPU's other work.
    const bool overlaps = decode && attention_overlaps();
    const double attention = overlaps ? c.decode_overlapped : 0, cpu = s[C] - attention;
    // The first sub-batch's QKV and the last one's feed-forward (half a layer of the device's
    // work), and one sub-batch's attention of a layer (half a layer of the CPU's), run alone.
    const double edges = overlaps ? (s[G] + attention) / (2.0 * shape_.n_layer) : 0;
    switch (chain) {
        case 0: return s[G] + cpu / m_ + edges + overhead;
        case 1: return cpu + s[G] / m_ + edges + overhead;
        default: return cpu + attention + edges + overhead;
    }
}

double CostModel::objective_scale() const {
    return wl_.objective == Objective::Throughput ? B_ * wl_.gen_len : wl_.gen_len;
}

Cost CostModel::total_cost(const Plan& plan) const {
    Cost total = fixed();
    double gpu_staging = 0, dram_staging = 0;
    auto add = [&](const Cost& c) {
        Cost no_staging = c;
        no_staging.gpu_staging = no_staging.dram_staging = 0;
        total += no_staging;
        // Staging buffers are reused from layer to layer: the largest one counts.
        gpu_staging = std::max(gpu_staging, c.gpu_staging);
        dram_staging = std::max(dram_staging, c.dram_staging);
    };
    const LayerPlacement* prev = nullptr;
    bool prev_prefill_on_cpu = false;
    for (const auto& l : plan.layers) {
        const Cost c = placed_layer(plan, l);
        add(c);
        // A CPU layer whose prompt pass op offload moved to the device priced no prefill hop.
        const bool prefill_on_cpu = c.prefill[C] > 0;
        // (A mixture of experts' layers beside the device each make their own round trip.)
        if (prev && !plan.experts.attention_on_gpu && on_cpu_beside_device(*prev) && on_cpu_beside_device(l))
            drop_hop(total, prev_prefill_on_cpu && prefill_on_cpu);
        prev = &l;
        prev_prefill_on_cpu = prefill_on_cpu;
    }
    add(output(plan.output));
    if (shape_.embd_bytes > 0) add(embedding(plan.embedding));
    const Cost h = hidden(plan.hidden);
    total += h;  // its staging is per layer in flight, beside the layer's own
    total.gpu_staging = gpu_staging + h.gpu_staging;
    total.dram_staging = dram_staging;
    total.decode_overhead -= graph_saving_s(plan);
    return total;
}

MemoryUse CostModel::memory(const Cost& t) const {
    return {t.bytes[kGpuTier] + t.gpu_staging, t.bytes[kDramTier] + t.dram_staging, t.bytes[kNvmeTier]};
}

double CostModel::ring_bound_s(const Plan& plan, Phase ph) const {
    auto compute = [&](const Cost& c) {
        return ph == Phase::Prefill ? c.prefill[C] + c.prefill_overhead : c.decode[C] + c.decode_overhead;
    };
    std::vector<double> layer_compute, layer_read;
    for (const auto& l : plan.layers) {
        const Cost c = placed_layer(plan, l);
        layer_compute.push_back(compute(c));
        // Streamed weights and spilled KV alike: each comes through a ring, and the disk serves both.
        layer_read.push_back(ph == Phase::Prefill ? c.prefill[N] : c.decode[N]);
    }
    Cost tail = fixed();
    tail += output(plan.output);
    if (shape_.embd_bytes > 0) tail += embedding(plan.embedding);
    tail += hidden(plan.hidden);
    return ring_pipeline_s(layer_compute, layer_read, compute(tail), limits_.stream_slots);
}

Prediction CostModel::predict(const Plan& plan) const {
    const Cost total = total_cost(plan);
    Prediction p;
    p.prefill = phase_time(Phase::Prefill, total);
    p.decode = phase_time(Phase::Decode, total);
    if (limits_.stream_slots > 0 && !has_gpu_) {
        // Streamed layers overlap compute only as far as the ring lets them read ahead.
        p.prefill.time_s = std::max(p.prefill.time_s, ring_bound_s(plan, Phase::Prefill));
        p.decode.time_s = std::max(p.decode.time_s, ring_bound_s(plan, Phase::Decode));
    }
    p.decode.time_s = std::max(p.decode.time_s, device_step_s(plan));
    p.ttft_s = p.prefill.time_s;
    p.decode_tps_per_seq = 1.0 / p.decode.time_s;
    p.decode_tps_aggregate = B_ / p.decode.time_s;
    p.total_s = p.prefill.time_s + n_decode_steps() * p.decode.time_s;
    p.throughput_tps = B_ * wl_.gen_len / p.total_s;
    p.objective_s = p.total_s / objective_scale();
    p.used = memory(total);
    return p;
}

}  // namespace strata::planner

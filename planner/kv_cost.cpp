// CostModel's price of a layer's KV cache: its bytes on their tier, attention where the plan
// runs it (the device, or the CPU reading the cache where it lies), the copies and hops that
// crossing the link takes, a spill's reads through its ring, and the prompt's entries written.
#include "planner/cost_model.h"

#include <algorithm>
#include <cmath>

namespace strata::planner {

namespace {
constexpr int G = static_cast<int>(Stream::GpuCompute), C = static_cast<int>(Stream::CpuCompute),
              H = static_cast<int>(Stream::PcieH2D), D = static_cast<int>(Stream::PcieD2H),
              N = static_cast<int>(Stream::Nvme), R = static_cast<int>(Stream::Dram);
}  // namespace

Cost CostModel::kv_cost(KvOption o, Device attention, bool q_crosses) const {
    Cost c;
    const bool act = is_recompute(o);
    const double per_tok = act ? shape_.act_bytes_per_token() : kvb_;  // bytes stored per token
    // The cache is read once per sequence however many rows attend to it; each row writes its entry.
    const double read = B_ * ctx_avg_ * per_tok, fresh = rows_d_ * per_tok, cap = B_ * ctx_max_ * per_tok, pre = B_ * P_ * per_tok;
    // New keys and values leave the device as floats, which the host stores in the cache's type.
    const double down_per_tok = act ? per_tok : shape_.kv_bytes_per_token(DType::F32);
    const double fresh_down = rows_d_ * down_per_tok, pre_down = B_ * P_ * down_per_tok;
    const double kv_read = B_ * ctx_avg_ * kvb_;
    const double attn_flops = rows_d_ * ctx_avg_ * shape_.attention_flops_per_position();
    const double recompute_flops = act ? B_ * ctx_avg_ * shape_.recompute_flops_per_token() : 0;
    const Tier tier = tier_of(o);
    c.bytes[static_cast<size_t>(tier)] = cap;
    // The device attends to a prompt's passes over the layer's blocks copied in from DRAM (the
    // runtime copies a layer's in and waits for them before the next layer's), whichever side
    // attends to decode, into one layer's keys and values staged there and reused layer after
    // layer (the device runtime's working set holds them where that is held apart). A prompt's
    // pass k copies the rows of its k passes so far (its own and those before; the last, the
    // whole prompt's).
    const bool in_working_set = limits_.dram_held_apart;
    const auto stage_prompt = [&] {
        if (!in_working_set) c.gpu_staging += mb_ * ctx_max_ * per_tok;
        const double rows = ModelShape::kPassRows, per_seq = std::ceil(P_ / rows);
        const double staged = B_ * (rows * per_seq * (per_seq - 1) / 2 + P_) * per_tok;
        c.prefill[H] += staged / h2d_;
        c.prefill[G] += sim_copy_s(staged);
        c.prefill[R] += staged / dram_bw_;
    };

    if (attention == Device::Gpu) {
        // The simulated device runs the CPU's attention kernel on its own threads: the CPU's tile
        // model prices it for this model's heads (the probe's points are one reference layer's,
        // whose time per byte a narrower head or a smaller group of query heads does not keep:
        // SmolLM2's took 1.6x its bytes' share); a GPU as measured at a few depths; else a catalog
        // GPU's bandwidth and FLOPS.
        const DeviceOps* o = ops();
        c.decode[G] = sim_attention()                ? m_ * cpu_decode_attention_s(hw_.gpu->sim_parallelism(), mb_)
                      : o && !o->attention.empty() ? m_ * o->attention_s(mb_ * ctx_avg_ * kvb_)
                                                     : std::max(kv_read / gpu_bw_, attn_flops / gpu_flops_);
        // Recomputed K/V go into one layer's pair shared by those layers (the working set's, as above).
        if (act) c.decode[G] += std::max(recompute_flops / gpu_flops_, read / gpu_bw_);
        if (act && !in_working_set) c.gpu_staging += mb_ * ctx_max_ * kvb_;
        // A decode pass rebuilds every position its sequences attend to; a sequence's prompt
        // pass k (of kPassRows rows each) the k chunks before it: their flops, and on a
        // measured device their ops.
        if (act) {
            const double rows = ModelShape::kPassRows, per_seq = std::ceil(P_ / rows);
            const double prompt_chunks = B_ * per_seq * (per_seq - 1) / 2;
            c.prefill[G] += prompt_chunks * rows * shape_.recompute_flops_per_token() / gpu_flops_;
            if (o) {
                const double chunk_ops = shape_.mean_per_layer(&LayerShape::rebuild_ops), op_s = o->op_overhead_us * 1e-6;
                c.decode_overhead += m_ * (ModelShape::kRecomputePassOps + std::ceil(mb_ * ctx_avg_ / rows) * chunk_ops) * op_s;
                c.prefill_overhead += (ModelShape::kRecomputePassOps * std::ceil(B_ * P_ / rows) + prompt_chunks * chunk_ops) * op_s;
            }
        }
        if (tier != Tier::Gpu) {
            // Streamed to the GPU each step, one micro-batch at a time; new entries go back.
            c.decode[H] += read / h2d_;
            c.decode[G] += sim_copy_s(read);
            c.decode[D] += fresh_down / d2h_;
            c.decode[R] += (read + fresh) / dram_bw_;
            stage_prompt();
        }
    } else {
        // CPU attention reads the cache where it lies; only q, the output and new entries cross PCIe.
        // Beside the device's matmuls it attends to NEO's two sub-batches in turn, a loop each.
        const bool halves = q_crosses && attention_overlaps();
        auto attend = [&] {
            return halves ? cpu_decode_attention_s(threads_, std::ceil(mb_ / 2)) + cpu_decode_attention_s(threads_, std::floor(mb_ / 2))
                          : cpu_decode_attention_s(threads_, mb_);
        };
        c.decode[C] = hw_.cpu.attention_tile ? m_ * attend() : std::max(kv_read / cpu_attn_bw_, attn_flops / cpu_attn_flops_);
        if (act) c.decode[C] += std::max(recompute_flops / cpu_gemm_, read / cpu_attn_bw_);
        c.decode[R] += (read + fresh) / dram_bw_;
        if (halves) c.decode_overlapped = c.decode[C];
        if (q_crosses) {
            stage_prompt();
            const double q = rows_d_ * shape_.n_head * shape_.head_dim * 4.0;
            c.decode[D] += (q + fresh_down) / d2h_;
            c.decode[H] += q / h2d_;
            c.decode_overhead += m_ * ((hop_s_ > 0 ? hop_s_ : cpu_sync_s_) + gpu_launch_s_);
        }
    }
    if (tier == Tier::Nvme) {
        // Through the spill's ring, from a scratch file of its own: the probe's curve at its depth.
        const double on_disk = read * limits_.kv_spill_bytes_factor, ring = limits_.kv_ring_inflight_bytes(on_disk);
        const double kv_r = ring > 0 ? hw_.nvme.read_gbps_at(ring) * 1e9 : nvme_r_;
        c.decode[N] += on_disk / kv_r + fresh / nvme_w_;
        c.decode[R] += read / dram_bw_;  // staged into DRAM
        c.dram_staging = 2 * mb_ * ctx_max_ * per_tok;
    }
    // Prefill writes the prompt's entries to their tier.
    if (tier != Tier::Gpu) {
        if (q_crosses) c.prefill[D] += pre_down / d2h_;
        c.prefill[R] += pre / dram_bw_;
        if (tier == Tier::Nvme) c.prefill[N] += pre / nvme_w_;
    }
    return held_apart(c, false);
}

}  // namespace strata::planner

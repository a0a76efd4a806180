// One pass on the device: its inputs uploaded (embeddings looked up on the host, positions,
// KV rows, block tables), each layer's program on the compute stream, and the layers (or
// steps) the host computes, their rows copied down and back up.
#include "runtime/exec/device/device_impl.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/error.h"
#include "core/trace.h"

namespace strata::runtime {

using gpu::Stream;

void project(gpu::Device& dev, gpu::Stream& s, const MatmulInput& in, std::span<const MatmulOutput> outs, int64_t n,
             int64_t n_long) {
    std::array<gpu::MatmulArgs, Step::kMaxProducts> parts;
    STRATA_ASSERT(outs.size() <= parts.size());
    auto rows = [&](int64_t r0, int64_t r1) {
        for (size_t i = 0; i < outs.size(); ++i) {
            const MatmulOutput& o = outs[i];
            const int64_t k = o.w.n_cols;
            gpu::MatmulArgs& a = parts[i];
            a = {o.w.type, o.w.data, in.x + r0 * k, o.y + r0 * o.w.n_rows, o.w.n_rows, k, r1 - r0, o.accumulate};
            a.norm_w = in.norm_w;
            a.norm_eps = in.norm_eps;
            a.swiglu_up = in.swiglu_up ? in.swiglu_up + r0 * k : nullptr;
        }
        dev.matmul_group(std::span<const gpu::MatmulArgs>(parts.data(), outs.size()), s);
    };
    if (n_long > 0) rows(0, n_long);
    for (int64_t r = n_long; r < n; r += gpu::Device::kRowWiseRows) rows(r, std::min(n, r + gpu::Device::kRowWiseRows));
}

void project(gpu::Device& dev, gpu::Stream& s, const DevWeight& w, const float* x, float* y, int64_t n, int64_t n_long) {
    const MatmulOutput out{w, y};
    project(dev, s, MatmulInput{x}, std::span(&out, 1), n, n_long);
}

float* DeviceBackend::Impl::act(Act a) const {
    const gpu::DeviceBuffer* bufs[kNumActs] = {&x, &xn, &q, &k, &v, &attn, &gate, &up, &out, &q_low_rank, &q_latent, &attn_latent};
    return bufs[static_cast<size_t>(a)]->as<float>();
}

// Embeddings (looked up on the host), positions, KV rows and, for GPU attention, one block
// table row, key count and draft tree (its first slot, the row's mask) per token: one copy each
// on the H2D stream.
void DeviceBackend::Impl::upload_pass(const PassLayout& p, const KvCache& kv) {
    const int64_t n = p.n(), E = hp.n_embd;
    float* emb = host->embd;
    embed_rows(hp, store.weights(), p.tokens, emb);
    int32_t* in = host->ints;  // pos, block, row, n_kv, tree base: n each
    int32_t* tab = host->tables;
    mask_words = 0;
    for (const DraftRows& d : p.drafts) mask_words = std::max(mask_words, d.words);
    STRATA_ASSERT(mask_words <= kMaskWords);  // a pass holds at most kMaxUbatch nodes
    for (const auto& seg : p.segments) {
        const DraftRows* d = seg.draft >= 0 ? &p.drafts[size_t(seg.draft)] : nullptr;
        for (int64_t i = 0; i < seg.n; ++i) {
            const int64_t t = seg.first + i, slot = d ? d->slot[size_t(i)] : p.pos[t];
            in[t] = static_cast<int32_t>(p.pos[t]);
            in[n + t] = p.block[t];
            in[2 * n + t] = p.row[t];
            in[3 * n + t] = static_cast<int32_t>(slot + 1);
            // A row of no tree sees every key before its own end.
            in[4 * n + t] = static_cast<int32_t>(d ? d->base : slot + 1);
            if (mask_words == 0) continue;
            uint64_t* mask = host->masks + t * mask_words;
            std::fill_n(mask, mask_words, 0);
            if (d) std::copy_n(&d->mask[size_t(i) * size_t(d->words)], d->words, mask);
        }
    }
    for (const auto& seg : p.segments) {
        const auto table = kv.block_table(seg.seq);
        for (int64_t i = 0; i < seg.n; ++i) {
            int32_t* dst = tab + (seg.first + i) * max_blocks;
            std::fill_n(dst, max_blocks, 0);
            std::copy_n(table.begin(), std::min<size_t>(table.size(), size_t(max_blocks)), dst);
        }
    }
    Stream& up_link = *h2d;
    // The previous pass may still be computing on the device buffers these copies overwrite.
    ev_computed->record(*compute);
    ev_computed->wait_on(up_link);
    if (!hidden.empty()) {
        rows_to_rebuild(kv, p.segments, rebuild_rows);
        n_rebuild = static_cast<int64_t>(rebuild_rows.size());
        int32_t* list = host->rebuild;
        for (int64_t i = 0; i < n_rebuild; ++i) {
            list[i] = rebuild_rows[i].block;
            list[n_rebuild + i] = rebuild_rows[i].row;
            list[2 * n_rebuild + i] = static_cast<int32_t>(rebuild_rows[i].pos);
        }
        if (n_rebuild > 0) dev->copy_h2d(rebuild_list.data(), list, size_t(3 * n_rebuild) * 4, up_link);
    }
    dev->copy_h2d(x.data(), emb, size_t(n * E) * 4, up_link);
    dev->copy_h2d(ints.data(), in, size_t(kPassInts * n) * 4, up_link);
    if (mask_words > 0) dev->copy_h2d(masks.data(), host->masks, size_t(n * mask_words) * 8, up_link);
    dev->copy_h2d(tables.data(), tab, size_t(n * max_blocks) * 4, up_link);
    ev_inputs->record(up_link);
    ev_inputs->wait_on(*compute);
    // The host buffers are rewritten by the next pass: wait for the copies before returning.
    ev_inputs->synchronize();
}

void DeviceBackend::Impl::layer(int il, const DevLayer& l, const PassLayout& p, KvCache& kv) {
    const LayerProgram& prog = programs[static_cast<size_t>(il)];
    const Rows r = pass_rows(p);
    run(prog.attention, prog, l, r, &p, kv);
    run(prog.feed_forward, prog, l, r, &p, kv);
}

// A run of layers whose matmuls the plan puts on the CPU: the pass's hidden states go down once,
// the CPU runs the layers on them (their KV cache in DRAM, attention on the CPU) while the copy
// stream brings in the device's next layers, and they come back up once. Copies the schedule
// puts between them (streamed layers, which wait for the CPU's turn in the stream) are issued
// in their place.
size_t DeviceBackend::Impl::layers_on_cpu(std::span<const PipelineStep> steps, size_t first, const PassLayout& p,
                                          KvCache& kv) {
    float* host_x = host_layers->act(Act::X);
    size_t end = first;
    on_host(p, x.as<float>(), host_x, [&] {
        for (; end < steps.size() && steps[end].kind != PipelineStep::Compute; ++end) {
            const PipelineStep& step = steps[end];
            if (step.kind == PipelineStep::Copy) {
                copy_in(step);
                continue;
            }
            const TraceScope traced(trace, cpu_layer_track, fmt::format("layer {}", step.layer));
            host_layers->run_layer(step.layer, kv, p);
        }
    }, host_x, x.as<float>());
    return end;
}

// The copy up goes on the D2H stream, after the copy down, not behind the weights queued on the
// H2D stream; the next copy down is ordered after it.
void DeviceBackend::Impl::on_host(const PassLayout& p, const float* down, float* host_down, const std::function<void()>& run,
                                  const float* host_up, float* up) {
    const size_t bytes = size_t(p.n() * hp.n_embd) * 4;
    ev_qkv->record(*compute);
    ev_qkv->wait_on(*d2h);
    dev->copy_d2h(host_down, down, bytes, *d2h);
    ev_down[0]->record(*d2h);
    ev_down[0]->synchronize();
    run();
    dev->copy_h2d(up, host_up, bytes, *d2h);
    ev_up[0]->record(*d2h);
    ev_up[0]->wait_on(*compute);
}

}  // namespace strata::runtime

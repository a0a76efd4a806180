// FastDecode/NEO on a device: the KV cache stays in DRAM and the host CPU attends, while the
// device runs the matmuls. A pass is cut into two sub-batches, A and B, at a sequence boundary,
// and the layers' work is issued so that the CPU's attention for one overlaps the device's
// matmuls for the other (NEO's asymmetric pipeline; FastDecode's R-part beside its S-part):
//
//   device: QKV(A,0) QKV(B,0) | out+FFN(A,0) QKV(A,1) | out+FFN(B,0) QKV(B,1) | out+FFN(A,1) ...
//   CPU:             attn(A,0) | attn(B,0)             | attn(A,1)             | attn(B,1)   ...
//
// Each sub-batch's q, k and v go down on the D2H stream once the device has them, its attention
// goes back up on the same stream (not behind the weights queued on H2D), and the device waits
// for it by event. Every op is row-wise or a matmul whose rows do not depend on each other, so
// the tokens are those of the pass run whole. A pass of one sequence is one sub-batch; a prompt's
// pass attends on the device (device_backend.cpp).
#include "runtime/exec/device/device_impl.h"

#include <algorithm>
#include <deque>

#include <fmt/format.h>

#include "core/error.h"
#include "core/trace.h"
#include "runtime/exec/cpu/attention_pass.h"

namespace strata::runtime {

namespace {
// Keys a segment's attention reads: the CPU's work for it.
int64_t keys_read(const PassLayout::Segment& s) { return s.n * (s.pos0 + s.n); }
}  // namespace

std::array<SubBatch, 2> split_for_cpu_attention(const PassLayout& p, bool split) {
    const auto segs = std::span(p.segments);
    std::array<SubBatch, 2> out{SubBatch{segs, 0, p.n()}, SubBatch{segs.last(0), p.n(), p.n()}};
    if (!split || segs.size() < 2) return out;
    int64_t total = 0;
    for (const auto& s : segs) total += keys_read(s);
    // The cut that halves the CPU's work best; a prompt chunk's rows (the first n_long) stay in
    // A, so that their matmuls are the same calls as the whole pass's.
    size_t cut = 0;
    int64_t before = 0, best = total;
    for (size_t i = 1; i < segs.size(); ++i) {
        before += keys_read(segs[i - 1]);
        if (segs[i].first < p.n_long) continue;
        const int64_t off = std::abs(2 * before - total);
        if (off < best) best = off, cut = i;
    }
    if (cut == 0) return out;
    const int64_t mid = segs[cut].first;
    return {SubBatch{segs.first(cut), 0, mid}, SubBatch{segs.subspan(cut), mid, p.n()}};
}

// The pass's layers as the schedule says, each device layer's attention on the host CPU, the
// two sub-batches interleaved. `pending` is the layer whose q, k, v are on their way down for
// both sub-batches and whose attention, output projection and feed-forward are still to come.
struct DeviceBackend::Impl::CpuAttentionPass {
    Impl& m;
    const PassLayout& p;
    KvCache& kv;
    std::array<SubBatch, 2> part;
    std::array<Rows, 2> rows;
    int pending = -1, pending_slot = -1;
    // Copies into the pending layer's slot, issued once its last compute is.
    std::deque<PipelineStep> deferred;

    CpuAttentionPass(Impl& impl, const PassLayout& pass, KvCache& cache)
        // A mixture of experts' feed-forward takes the whole pass (device_moe.cpp): not split.
        : m(impl), p(pass), kv(cache), part(split_for_cpu_attention(pass, !impl.hp.moe.enabled())) {
        const Rows all = m.pass_rows(p);
        for (int h = 0; h < 2; ++h) rows[h] = sub_rows(all, part[h]);
    }

    Rows sub_rows(const Rows& all, const SubBatch& b) const {
        Rows r = all;
        for (size_t a = 0; a < kNumActs; ++a)
            if (r.act[a]) r.act[a] += b.r0 * act_width(m.hp, static_cast<Act>(a));
        r.n = b.r1 - b.r0;
        r.n_long = std::clamp<int64_t>(all.n_long - b.r0, 0, r.n);
        r.pos += b.r0;
        r.block += b.r0;
        r.row += b.r0;
        return r;
    }

    void run() {
        // A prompt's pass here (the device cannot read the cache's type) may be op offload's: its
        // CPU layers computed on the device, the CPU attending for them as for the rest.
        const std::vector<PipelineStep>& steps = m.schedule_for(p);
        for (size_t i = 0; i < steps.size(); ++i) {
            const PipelineStep& step = steps[i];
            if (step.kind == PipelineStep::Copy) {
                const bool wait = !deferred.empty() || (pending >= 0 && step.slot == pending_slot);
                if (wait) deferred.push_back(step);
                else m.copy_in(step);
                continue;
            }
            if (step.kind == PipelineStep::CpuCompute) {
                finish_pending();
                i = m.layers_on_cpu(steps, i, p, kv) - 1;
                continue;
            }
            next_layer(step);
        }
        finish_pending();
    }

    // Layer `step.layer` starts (its queries, keys and values, sent down) between the two
    // halves of the pending layer's end, unless its weights wait for that end.
    void next_layer(const PipelineStep& step) {
        const bool copy_waits = std::any_of(deferred.begin(), deferred.end(), [&](const PipelineStep& d) { return d.layer == step.layer; });
        if (copy_waits) finish_pending();
        for (int h = 0; h < 2; ++h) {
            if (pending >= 0) finish(h);
            if (pending >= 0 && h == 1) release_pending();
            if (h == 0 && step.slot >= 0) m.copied[step.slot]->wait_on(*m.compute);
            start(step.layer, h);
        }
        pending = step.layer;
        pending_slot = step.slot;
    }

    void finish_pending() {
        if (pending < 0) return;
        for (int h = 0; h < 2; ++h) finish(h);
        release_pending();
        pending = -1;
    }

    // The pending layer's slot is free once both its halves are issued: the copies it held back go.
    void release_pending() {
        if (pending_slot >= 0) m.computed[pending_slot]->record(*m.compute);
        while (!deferred.empty()) {
            m.copy_in(deferred.front());
            deferred.pop_front();
        }
    }

    const Step& attend_step(const LayerProgram& prog) const {
        const auto it = std::find_if(prog.attention.begin(), prog.attention.end(), [](const Step& s) { return s.op == Op::Attend; });
        STRATA_ASSERT(it != prog.attention.end());
        return *it;
    }

    // Device: the attention block up to its Attend for sub-batch h; then its q, k, v go down.
    void start(int il, int h) {
        const SubBatch& b = part[h];
        if (b.empty()) return;
        const LayerProgram& prog = m.programs[size_t(il)];
        const Step& st = attend_step(prog);
        const auto before = std::span(prog.attention).first(size_t(&st - prog.attention.data()));
        m.run(before, prog, m.layers[il], rows[h], &p, kv);
        const int64_t n = b.rows(), Q = act_width(m.hp, st.src), KV = m.hp.n_embd_kv();
        m.ev_ready[h]->record(*m.compute);
        m.ev_ready[h]->wait_on(*m.d2h);
        m.dev->copy_d2h(m.host->q + b.r0 * Q, rows[h].act[size_t(st.src)], size_t(n * Q) * 4, *m.d2h);
        m.dev->copy_d2h(m.host->k + b.r0 * KV, rows[h].act[size_t(Act::K)], size_t(n * KV) * 4, *m.d2h);
        m.dev->copy_d2h(m.host->v + b.r0 * KV, rows[h].act[size_t(Act::V)], size_t(n * KV) * 4, *m.d2h);
        m.ev_down[h]->record(*m.d2h);
    }

    // CPU: the pending layer's attention for sub-batch h, sent up; device: the rest of the layer.
    void finish(int h) {
        const SubBatch& b = part[h];
        if (b.empty()) return;
        const int il = pending;
        const LayerProgram& prog = m.programs[size_t(il)];
        const DevLayer& l = m.layers[il];
        const Step& st = attend_step(prog);
        const AttentionSpec& spec = prog.attention_spec;
        const int64_t n = b.rows(), KV = m.hp.n_embd_kv(), O = act_width(m.hp, Act::Attn);
        const bool first = h == 0 || part[0].empty(), last = h == 1 || part[1].empty();
        // The host's copy of the sinks (the file's, always mapped).
        const float* sinks = spec.sinks ? (m.store.weights().layers[size_t(il)].*spec.sinks).f32() : nullptr;
        m.ev_down[h]->synchronize();
        if (first) kv.begin_layer(il);
        {
            const TraceScope traced(m.trace, m.attention_track,
                                    part[1].empty() ? fmt::format("layer {}", il) : fmt::format("layer {} {}", il, h ? 'B' : 'A'));
            for (int64_t t = b.r0; t < b.r1; ++t) kv.store(il, p.block[t], p.row[t], m.host->k + t * KV, m.host->v + t * KV);
            attend_on_cpu(spec, kv, il, b.segs, m.host->q, m.host->attn, sinks, p.drafts);
        }
        // Without an output projection, attention's output is the step's.
        float* up = st.w ? m.dev_f(m.attn, b.r0, O) : rows[h].act[size_t(st.dst)];
        m.dev->copy_h2d(up, m.host->attn + b.r0 * O, size_t(n * O) * 4, *m.d2h);
        m.ev_up[h]->record(*m.d2h);
        m.ev_up[h]->wait_on(*m.compute);
        if (last) kv.end_layer(il, p.dirty);
        if (st.w) m.project(l[st.w], m.dev_f(m.attn, b.r0, O), rows[h].act[size_t(st.dst)], n, rows[h].n_long);
        const auto after = std::span(prog.attention).subspan(size_t(&st - prog.attention.data()) + 1);
        m.run(after, prog, l, rows[h], &p, kv);
        m.run(prog.feed_forward, prog, l, rows[h], &p, kv);
    }
};

void DeviceBackend::Impl::run_with_cpu_attention(const PassLayout& p, KvCache& kv) { CpuAttentionPass(*this, p, kv).run(); }

}  // namespace strata::runtime

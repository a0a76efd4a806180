// The steps of a layer program (runtime/exec/layer_program.h) on the CPU: matmuls, attention
// and experts over the whole pass; each run of consecutive row-wise steps as one parallel loop
// whose task applies them all to one row, so a layer's queries, keys and values are prepared
// and stored in one loop, and a block's post-norm and residual in another.
#include <algorithm>

#include "core/error.h"
#include "cpu/kv_format.h"
#include "cpu/norm_rope_act.h"
#include "cpu/thread_pool.h"
#include "runtime/exec/cpu/attention_pass.h"
#include "runtime/exec/cpu/cpu_backend.h"

namespace strata::runtime {

cpu::RopeParams CpuBackend::rope_params(const RopeSpec& spec) const {
    cpu::RopeParams r = spec.params;
    const WeightRef* factors[] = {nullptr, &w_.rope_freqs, &w_.rope_long, &w_.rope_short};
    const WeightRef* f = factors[static_cast<size_t>(spec.factors)];
    r.freq_factors = f ? f->f32() : nullptr;
    return r;
}

void CpuBackend::run(std::span<const Step> steps, const LayerProgram& prog, const LayerWeights& l, const Rows& r, KvCache& kv,
                     const PassLayout* p) {
    const cpu::RopeParams rope = rope_params(prog.rope);
    for (size_t i = 0; i < steps.size();) {
        if (!row_wise(steps[i].op)) {
            pass_step(steps[i++], prog, l, r, kv, p);
            continue;
        }
        size_t end = i + 1;
        while (end < steps.size() && row_wise(steps[end].op)) ++end;
        const std::span<const Step> run_rows = steps.subspan(i, end - i);
        cpu::parallel_for(r.n, [&](int64_t t) {
            for (const Step& s : run_rows) row_step(s, prog, l, r, kv, rope, t);
        });
        i = end;
    }
}

void CpuBackend::pass_step(const Step& s, const LayerProgram& prog, const LayerWeights& l, const Rows& r, KvCache& kv,
                           const PassLayout* p) {
    auto at = [&](Act a) { return r.act[static_cast<size_t>(a)]; };
    switch (s.op) {
        case Op::Matmul: {
            // Every product from one conversion of the input and one parallel loop.
            std::array<cpu::MatmulOut, 3> outs;
            for (int32_t i = 0; i < s.n_products; ++i) outs[i] = matmul_out(l.*s.products[i].w, at(s.products[i].dst));
            mm_.run({outs.data(), size_t(s.n_products)}, width_[size_t(s.src)], at(s.src), r.n, r.n_long);
            return;
        }
        case Op::HeadMatmul: head_matmul(s, l, r); return;
        case Op::Attend: {
            STRATA_ASSERT(p);
            if (kv.rebuilt(prog.il)) rebuild(prog, l, kv);
            const AttentionSpec& spec = prog.attention_spec;
            const float* sinks = spec.sinks ? (l.*spec.sinks).f32() : nullptr;
            float* out = s.w ? at(Act::Attn) : at(s.dst);
            attend_on_cpu(spec, kv, prog.il, p->segments, at(s.src), out, sinks, p->drafts);
            if (s.w) mm_.project(l.*s.w, out, r.n, at(s.dst), r.n_long);
            return;
        }
        case Op::Experts:
            STRATA_ASSERT(p && moe_);
            moe_->run(prog.il, l, mm_, *p, at(s.src), at(s.dst), *stats_);
            return;
        default: STRATA_ASSERT(!"a row-wise step run as a pass step");
    }
}

void CpuBackend::row_step(const Step& s, const LayerProgram& prog, const LayerWeights& l, const Rows& r, KvCache& kv,
                          const cpu::RopeParams& rope, int64_t t) const {
    auto row = [&](Act a) { return r.act[static_cast<size_t>(a)] + t * width_[static_cast<size_t>(a)]; };
    const int64_t n = width_[static_cast<size_t>(s.dst)];
    float* dst = row(s.dst);
    switch (s.op) {
        case Op::Norm: cpu::rms_norm(row(s.src), (l.*s.w).f32(), dst, (l.*s.w).n_cols, hp_.rms_eps); return;
        case Op::HeadNorm: {
            const int64_t d = n / s.n_heads;
            for (int32_t h = 0; h < s.n_heads; ++h) cpu::rms_norm(dst + h * d, (l.*s.w).f32(), dst + h * d, d, hp_.rms_eps);
            return;
        }
        case Op::Bias: cpu::add(dst, (l.*s.w).f32(), n); return;
        case Op::Rope: {
            cpu::RopeParams head = rope;
            head.head_dim = static_cast<int32_t>(n / s.n_heads);
            cpu::rope(dst + s.offset, s.n_heads, r.pos[t], head);
            return;
        }
        case Op::StoreKv:
            kv.store(prog.il, r.block[t], r.row[t], row(Act::K), prog.attention_spec.values_in_keys ? row(Act::K) : row(Act::V));
            if (r.save_inputs && kv.rebuilt(prog.il)) kv.store_hidden(prog.il, r.block[t], r.row[t], row(Act::XN));
            return;
        case Op::Glu:
            if (s.act == models::FfnAct::GeluTanh) cpu::geglu(dst, row(s.src), n);
            else if (s.act == models::FfnAct::SiluClamped) cpu::swiglu_clamped(dst, row(s.src), n, hp_.swiglu_alpha, hp_.swiglu_limit);
            else cpu::swiglu(dst, row(s.src), n);
            return;
        case Op::Add: cpu::add(dst, row(s.src), n); return;
        default: STRATA_ASSERT(!"a pass step run as a row-wise step");
    }
}

void CpuBackend::head_matmul(const Step& s, const LayerWeights& l, const Rows& r) {
    const WeightRef& w = l.*s.w;
    const int64_t n = r.n, in_w = width_[size_t(s.src)] / s.n_heads, out_w = width_[size_t(s.dst)] / s.n_heads;
    const int64_t cols = w.n_cols, rows = w.n_rows, rest = in_w - cols;
    STRATA_ASSERT(out_w == rows + rest);
    const float* src = r.act[size_t(s.src)];
    float* dst = r.act[size_t(s.dst)];
    head_in_.resize(size_t(n * cols));
    head_out_.resize(size_t(n * rows));
    for (int32_t h = 0; h < s.n_heads; ++h) {
        // The head's rows gathered, multiplied by its own matrix, scattered back with the values it keeps.
        cpu::parallel_for(n, [&](int64_t t) {
            std::copy_n(src + t * s.n_heads * in_w + h * in_w, cols, &head_in_[size_t(t * cols)]);
        });
        mm_.project(w.mat(h), head_in_.data(), n, head_out_.data(), r.n_long);
        cpu::parallel_for(n, [&](int64_t t) {
            const float* in = src + t * s.n_heads * in_w + h * in_w;
            float* out = dst + t * s.n_heads * out_w + h * out_w;
            std::copy_n(&head_out_[size_t(t * rows)], rows, out);
            std::copy_n(in + cols, rest, out + rows);
        });
    }
}

void CpuBackend::rebuild(const LayerProgram& prog, const LayerWeights& l, KvCache& kv) {
    const int il = prog.il;
    const int64_t E = hp_.n_embd, KV = hp_.n_embd_kv(), chunk = kMaxUbatch;
    rebuild_x_.resize(chunk * E);
    rebuild_k_.resize(chunk * KV);
    rebuild_v_.resize(chunk * KV);
    rebuild_pos_.resize(chunk);
    rebuild_block_.resize(chunk);
    rebuild_row_.resize(chunk);
    Rows r;
    r.act[size_t(Act::XN)] = rebuild_x_.data();
    r.act[size_t(Act::K)] = rebuild_k_.data();
    r.act[size_t(Act::V)] = rebuild_v_.data();
    r.pos = rebuild_pos_.data();
    r.block = rebuild_block_.data();
    r.row = rebuild_row_.data();
    r.save_inputs = false;
    const int64_t total = static_cast<int64_t>(rebuild_rows_.size());
    for (int64_t r0 = 0; r0 < total; r0 += chunk) {
        // Every row of a chunk in one matmul, as when they were first computed in a prompt.
        r.n = r.n_long = std::min(chunk, total - r0);
        cpu::parallel_for(r.n, [&](int64_t i) {
            const RebuildRow& row = rebuild_rows_[size_t(r0 + i)];
            cpu::load_kv_values(kv.type(), kv.hidden(il, row.block) + row.row * kv.hidden_row_bytes(), 0, &rebuild_x_[i * E], E);
            rebuild_pos_[i] = row.pos;
            rebuild_block_[i] = row.block;
            rebuild_row_[i] = row.row;
        });
        run(prog.key_value, prog, l, r, kv, nullptr);
    }
}

}  // namespace strata::runtime

// The steps of a layer program (runtime/exec/layer_program.h) as gpu::Device ops on the
// compute stream, one step at a time; attention where the KV placement says, a mixture of
// experts' experts on the host.
#include "runtime/exec/device/device_impl.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace strata::runtime {

DeviceBackend::Impl::Rows DeviceBackend::Impl::pass_rows(const PassLayout& p) const {
    Rows r;
    for (size_t a = 0; a < kNumActs; ++a) r.act[a] = act(static_cast<Act>(a));
    r.n = p.n();
    r.n_long = p.n_long;
    const int32_t* in = ints.as<int32_t>();  // pos, block, row, n_kv, tree base: n each (upload_pass)
    r.pos = in;
    r.block = in + r.n;
    r.row = in + 2 * r.n;
    return r;
}

gpu::RopeArgs DeviceBackend::Impl::rope_args(const RopeSpec& spec, int32_t n_heads, int64_t width) const {
    gpu::RopeArgs rope;
    rope.n_heads = n_heads;
    rope.head_dim = static_cast<int32_t>(width / n_heads);
    rope.n_rot = spec.params.n_rot;
    rope.freq_base = spec.params.freq_base;
    rope.freq_scale = spec.params.freq_scale;
    rope.neox = spec.params.neox;
    const DevWeight& factors = rope_factors[static_cast<size_t>(spec.factors)];
    rope.freq_factors = factors ? factors.f32() : nullptr;
    rope.attn_factor = spec.params.attn_factor;
    rope.ext_factor = spec.params.ext_factor;
    rope.yarn_low = spec.params.yarn_low;
    rope.yarn_high = spec.params.yarn_high;
    return rope;
}

namespace {

// Whether step `s` reads activation `a`: its source, the destination it works on in place, or
// what it uses besides (the KV store its keys, values and, saving inputs, XN; attention its queries).
bool reads(const Step& s, Act a, bool saves_inputs) {
    switch (s.op) {
        case Op::Norm: case Op::Matmul: case Op::HeadMatmul: case Op::Experts: return s.src == a;
        case Op::HeadNorm: case Op::Bias: case Op::Rope: return s.dst == a;
        case Op::Glu: case Op::Add: return s.dst == a || s.src == a;
        case Op::StoreKv: return a == Act::K || a == Act::V || (saves_inputs && a == Act::XN);
        case Op::Attend: return a == s.src || a == Act::K || a == Act::V || a == Act::Attn;
    }
    return true;
}
bool read_later(std::span<const Step> steps, Act a, bool saves_inputs) {
    return std::any_of(steps.begin(), steps.end(), [&](const Step& s) { return reads(s, a, saves_inputs); });
}

}  // namespace

// A run of steps the device does as one: a norm or SwiGLU that only the next matmul reads is
// applied on the way into it, and a residual add of a lone product (or of attention's output
// projection) accumulates it into the stream. Returns the steps it took, 0 where none fuse. The
// simulated device computes fused and unfused alike, so the CPU's bits are kept there.
size_t DeviceBackend::Impl::fused(std::span<const Step> s, const LayerProgram& prog, const DevLayer& l, const Rows& r,
                                  const PassLayout* p, KvCache& kv, bool saves_inputs) {
    auto at = [&](Act a) { return r.act[static_cast<size_t>(a)]; };
    const bool transform_in = s.size() >= 2 && s[1].op == Op::Matmul && s[1].src == s[0].dst &&
                              (s[0].op == Op::Norm || (s[0].op == Op::Glu && s[0].act == models::FfnAct::Silu)) &&
                              !read_later(s.subspan(2), s[0].dst, saves_inputs);
    const size_t i = transform_in ? 1 : 0;
    const Step& m = s[i];
    const bool attend = m.op == Op::Attend && m.w && !transform_in && !host_attends;
    if (m.op != Op::Matmul && !attend) return 0;
    const Act out = attend ? m.dst : m.products[0].dst;
    const bool add = (attend || m.n_products == 1) && i + 1 < s.size() && s[i + 1].op == Op::Add && s[i + 1].src == out &&
                     s[i + 1].dst != out && !read_later(s.subspan(i + 2), out, saves_inputs);
    if (!transform_in && !add) return 0;

    MatmulInput in{attend ? attn.as<float>() : at(m.src)};
    if (transform_in && s[0].op == Op::Norm) in.norm_w = l[s[0].w].f32(), in.norm_eps = hp.rms_eps, in.x = at(s[0].src);
    if (transform_in && s[0].op == Op::Glu) in.swiglu_up = at(s[0].src);
    std::array<MatmulOutput, Step::kMaxProducts> outs;
    size_t n_outs = 0;
    if (attend) {
        STRATA_ASSERT(p);
        attention_on_device(prog, l, *p, kv, at(m.src), attn.as<float>());
        outs[n_outs++] = {l[m.w], add ? at(s[i + 1].dst) : at(m.dst), add};
    } else {
        for (const Product& pr : m.matmul()) outs[n_outs++] = {l[pr.w], add ? at(s[i + 1].dst) : at(pr.dst), add};
    }
    runtime::project(*dev, *compute, in, std::span<const MatmulOutput>(outs.data(), n_outs), r.n, r.n_long);
    return i + 1 + (add ? 1 : 0);
}

void DeviceBackend::Impl::run(std::span<const Step> steps, const LayerProgram& prog, const DevLayer& l, const Rows& r,
                              const PassLayout* p, KvCache& kv) {
    const bool saves_inputs = r.save_inputs && hidden_slot[prog.il] >= 0;
    for (size_t i = 0; i < steps.size();) {
        const std::span<const Step> rest = steps.subspan(i);
        size_t taken = rotated_with_store(rest, prog, l, r, p, kv, saves_inputs);
        if (!taken) taken = fused(rest, prog, l, r, p, kv, saves_inputs);
        if (taken) {
            i += taken;
            continue;
        }
        step(steps[i], prog, l, r, p, kv);
        ++i;
    }
}

// The queries' RoPE, the keys' RoPE and, where the KV cache is on the device, the K and V stores
// are one op (Device::rope_qkv_store). With the cache on the device, the keys are rotated on
// their way into it where nothing but the store reads the rotated keys (attention reads them back
// from the cache): one launch instead of three. With the cache on the host (which stores the
// rotated keys), queries and keys are rotated in place: one launch instead of two. The queries
// join where nothing before the op reads or writes them. The steps in between (a bias or head
// norm of the keys or values) run first. Starts at the queries' or the keys' Rope; returns the
// steps taken, 0 where none.
size_t DeviceBackend::Impl::rotated_with_store(std::span<const Step> s, const LayerProgram& prog, const DevLayer& l,
                                               const Rows& r, const PassLayout* p, KvCache& kv, bool saves_inputs) {
    // MLA rotates the RoPE part at the end of its cache row (an offset), which the store's RoPE does not.
    auto plain_rope = [](const Step& st, Act a) { return st.op == Op::Rope && st.dst == a && st.offset == 0; };
    if (s.empty() || !(plain_rope(s[0], Act::Q) || plain_rope(s[0], Act::K))) return 0;
    const bool with_queries = s[0].dst == Act::Q, device_cache = kv_of(prog.il) == KvPlacement::Device;
    const auto keys = std::find_if(s.begin(), s.end(), [&](const Step& st) { return plain_rope(st, Act::K); });
    if (keys == s.end() || (!device_cache && !with_queries)) return 0;
    // The op's last step: the store, or on the host's cache the keys' Rope.
    const auto last = device_cache ? std::find_if(keys + 1, s.end(), [](const Step& st) { return st.op == Op::StoreKv; }) : keys;
    auto reads_keys = [&](const Step& st) { return st.op != Op::Attend && st.op != Op::StoreKv && reads(st, Act::K, saves_inputs); };
    auto uses_queries = [&](const Step& st) {
        const auto products = st.op == Op::Matmul ? st.matmul() : std::span<const Product>{};
        return reads(st, Act::Q, saves_inputs) || st.dst == Act::Q ||
               std::any_of(products.begin(), products.end(), [](const Product& pr) { return pr.dst == Act::Q; });
    };
    if (last == s.end() || (device_cache && std::any_of(keys + 1, s.end(), reads_keys))) return 0;
    if (with_queries && std::any_of(s.begin() + 1, last, uses_queries)) return 0;
    for (auto it = s.begin() + 1; it != last; ++it)
        if (it != keys) step(*it, prog, l, r, p, kv);
    const gpu::RopeArgs key_rope = rope_args(prog.rope, keys->n_heads, act_width(hp, Act::K));
    const gpu::RopeArgs query_rope = rope_args(prog.rope, s[0].n_heads, act_width(hp, Act::Q));
    if (device_cache) {
        store_kv(prog.il, r, &key_rope, with_queries ? &query_rope : nullptr);
    } else {
        const gpu::KvRows no_cache{nullptr, kv_type, nullptr, nullptr, r.n, hp.n_embd_kv(), 0, 0};
        dev->rope_qkv_store({.q = r.act[size_t(Act::Q)], .q_rope = query_rope, .k = r.act[size_t(Act::K)], .k_rope = key_rope,
                             .k_rows = no_cache, .pos = r.pos},
                            *compute);
    }
    return size_t(last - s.begin()) + 1;
}

void DeviceBackend::Impl::store_kv(int il, const Rows& r, const gpu::RopeArgs* key_rope, const gpu::RopeArgs* query_rope) {
    gpu::Stream& s = *compute;
    const int64_t E = hp.n_embd, KV = hp.n_embd_kv();
    float* k_rows = r.act[size_t(Act::K)];
    if (r.save_inputs && hidden_slot[il] >= 0)
        dev->kv_store(r.act[size_t(Act::XN)], {hidden[hidden_slot[il]].data(), kv_type, r.block, r.row, r.n, E,
                                               hidden_row_bytes, KvCache::kBlockSize * hidden_row_bytes}, s);
    const int32_t slot = kv_slot[il];
    const gpu::KvRows k_dst{kv_k[slot].data(), kv_type, r.block, r.row, r.n, KV, kv_row_bytes, kv_block_bytes};
    // MLA's latent is its values too: its layers hold key rows only.
    const float* v_rows = kv_v[slot].data() ? r.act[size_t(Act::V)] : nullptr;
    const gpu::KvRows v_dst{kv_v[slot].data(), kv_type, r.block, r.row, r.n, KV, kv_row_bytes, kv_block_bytes};
    if (key_rope) {
        dev->rope_qkv_store({.q = query_rope ? r.act[size_t(Act::Q)] : nullptr,
                             .q_rope = query_rope ? *query_rope : gpu::RopeArgs{},
                             .k = k_rows,
                             .k_rope = *key_rope,
                             .k_rows = k_dst,
                             .v = v_rows,
                             .v_rows = v_dst,
                             .pos = r.pos},
                            s);
        return;
    }
    dev->kv_store(k_rows, k_dst, s);
    if (v_rows) dev->kv_store(v_rows, v_dst, s);
}

void DeviceBackend::Impl::step(const Step& st, const LayerProgram& prog, const DevLayer& l, const Rows& r, const PassLayout* p,
                               KvCache& kv) {
    gpu::Stream& s = *compute;
    auto at = [&](Act a) { return r.act[static_cast<size_t>(a)]; };
    const int64_t n = r.n, width = act_width(hp, st.dst);
    float* dst = at(st.dst);
    switch (st.op) {
        case Op::Norm: {
            const int64_t cols = l[st.w].n_cols;
            if (cols == width) return dev->rms_norm(at(st.src), l[st.w].f32(), dst, n, width, hp.rms_eps, s);
            // MLA's latent, normed in place at the start of its cache row: through attn_latent,
            // which is free until attention (and a KV rebuild runs before it).
            STRATA_ASSERT(st.src == st.dst && cols < width);
            float* part = attn_latent.as<float>();
            dev->copy_rows(part, cols, dst, width, n, cols, s);
            dev->rms_norm(part, l[st.w].f32(), part, n, cols, hp.rms_eps, s);
            dev->copy_rows(dst, width, part, cols, n, cols, s);
            return;
        }
        case Op::HeadNorm: dev->rms_norm(dst, l[st.w].f32(), dst, n * st.n_heads, width / st.n_heads, hp.rms_eps, s); return;
        case Op::Bias: dev->add_rows(dst, l[st.w].f32(), n, width, s); return;
        case Op::Rope: {
            gpu::RopeArgs rope = rope_args(prog.rope, st.n_heads, width);
            if (st.offset > 0) rope.row_width = width;
            dev->rope(dst + st.offset, r.pos, n, rope, s);
            return;
        }
        // With the KV cache on the host, attention stores the rows there (device_attention.cpp,
        // cpu_attention_pipeline.cpp).
        case Op::StoreKv:
            if (kv_of(prog.il) == KvPlacement::Device) store_kv(prog.il, r);
            return;
        case Op::Glu:
            if (st.act == models::FfnAct::GeluTanh) dev->geglu(dst, at(st.src), n, width, s);
            else if (st.act == models::FfnAct::SiluClamped)
                dev->swiglu_clamped(dst, at(st.src), n, width, hp.swiglu_alpha, hp.swiglu_limit, s);
            else dev->swiglu(dst, at(st.src), n, width, s);
            return;
        case Op::Add: dev->add(dst, at(st.src), n * width, s); return;
        case Op::Matmul: {
            std::array<MatmulOutput, Step::kMaxProducts> outs;
            for (size_t i = 0; i < st.matmul().size(); ++i) outs[i] = {l[st.matmul()[i].w], at(st.matmul()[i].dst)};
            runtime::project(*dev, *compute, MatmulInput{at(st.src)}, std::span(outs.data(), st.matmul().size()), n, r.n_long);
            return;
        }
        case Op::Attend:
            STRATA_ASSERT(p);
            // The host CPU's attention is cpu_attention_pipeline.cpp's, between the steps it runs here.
            STRATA_ASSERT(!host_attends);
            if (!st.w) return attention_on_device(prog, l, *p, kv, at(st.src), dst);
            attention_on_device(prog, l, *p, kv, at(st.src), attn.as<float>());
            project(l[st.w], attn.as<float>(), dst, n, r.n_long);
            return;
        case Op::Experts:
            STRATA_ASSERT(p);
            experts_on_host(prog.il, *p, at(st.src), dst);
            return;
        case Op::HeadMatmul: head_matmul(st, l, r); return;
    }
}

void DeviceBackend::Impl::head_matmul(const Step& st, const DevLayer& l, const Rows& r) {
    const DevWeight& w = l[st.w];
    const int64_t H = st.n_heads, in_w = act_width(hp, st.src) / H, out_w = act_width(hp, st.dst) / H;
    const int64_t cols = w.n_cols, rows = w.n_rows, rest = in_w - cols;
    const float* src = r.act[size_t(st.src)];
    float* dst = r.act[size_t(st.dst)];
    // Every head in one op: rows [0, n_long) together, the rest kRowWiseRows at a time, as
    // runtime::project runs a product.
    auto heads = [&](int64_t r0, int64_t r1) {
        dev->head_matmul({.type = w.type, .w = w.data, .x = src + r0 * H * in_w, .y = dst + r0 * H * out_w, .n_rows = rows,
                          .n_cols = cols, .n_tok = r1 - r0, .n_heads = int32_t(H), .x_row = H * in_w, .x_head = in_w,
                          .y_row = H * out_w, .y_head = out_w},
                         *compute);
    };
    if (r.n_long > 0) heads(0, r.n_long);
    for (int64_t t = r.n_long; t < r.n; t += gpu::Device::kRowWiseRows) heads(t, std::min(r.n, t + gpu::Device::kRowWiseRows));
    // The rest of each head's values (MLA's RoPE part, after the part the matrix takes) as they
    // are, after its products: one copy of every token's heads.
    if (rest > 0) dev->copy_rows(dst + rows, out_w, src + cols, in_w, r.n * H, rest, *compute);
}

}  // namespace strata::runtime

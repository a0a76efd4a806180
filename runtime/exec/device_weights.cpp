// Weights on the device: the output head, the layers the plan keeps there (read once at load
// through a pinned buffer), and the rebasing of a streamed layer's tensors into its slot.
#include "runtime/exec/device_impl.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"

namespace strata::runtime {

DevLayer rebase(const WeightStore& store, int il, const LayerWeights& l, const std::byte* base) {
    auto at = [&](const WeightRef& w) -> DevWeight {
        if (!w) return {};
        return {w.type, base + store.offset_in_layer(il, w), w.n_rows, w.n_cols};
    };
    return {at(l.attn_norm), at(l.wq), at(l.wk), at(l.wv), at(l.wo),       at(l.bq),       at(l.bk),
            at(l.bv),        at(l.ffn_norm), at(l.ffn_gate), at(l.ffn_up), at(l.ffn_down), at(l.q_norm), at(l.k_norm)};
}

namespace {

void check_types(const gpu::Device& dev, const LayerWeights& l, int il) {
    // A mixture of experts has no dense feed-forward: its experts run on the host.
    for (const WeightRef* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_gate, &l.ffn_up, &l.ffn_down})
        if (*w && !dev.supports_weight(w->type))
            throw BackendError(fmt::format("layer {} has {} weights, which {}'s kernels do not read", il, dtype_name(w->type),
                                           dev.name()),
                               "run this model on the CPU (--device cpu)");
    for (const WeightRef* w : {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm})
        if (*w && w->type != DType::F32)
            throw BackendError(fmt::format("layer {} has a {} norm or bias; the device path expects f32", il, dtype_name(w->type)),
                               "run this model on the CPU (--device cpu)");
}

}  // namespace

void DeviceBackend::Impl::load_weights(storage::MemoryBudget& dram) {
    const ModelWeights& w = store.weights();
    if (!dev->supports_weight(w.output.type))
        throw BackendError(fmt::format("the output head is {}, which {}'s kernels do not read", dtype_name(w.output.type),
                                       dev->name()),
                           "run this model on the CPU (--device cpu)");
    // The head: output norm, output matrix and rope factors in one buffer.
    const uint64_t norm_bytes = storage::align_up(w.output_norm.info->nbytes, 256);
    const uint64_t out_bytes = storage::align_up(w.output.info->nbytes, 256);
    const uint64_t rope_bytes = w.rope_freqs ? w.rope_freqs.info->nbytes : 0;
    head_buf = dev->memory().allocate(norm_bytes + out_bytes + rope_bytes, "the output head");
    auto* base = head_buf.as<std::byte>();
    dev->copy_h2d(base, w.output_norm.data, w.output_norm.info->nbytes, *h2d);
    dev->copy_h2d(base + norm_bytes, w.output.data, w.output.info->nbytes, *h2d);
    if (w.rope_freqs) dev->copy_h2d(base + norm_bytes + out_bytes, w.rope_freqs.data, rope_bytes, *h2d);
    output_norm = {DType::F32, base, 1, hp.n_embd};
    output = {w.output.type, base + norm_bytes, w.output.n_rows, w.output.n_cols};
    if (w.rope_freqs) rope_freqs = {DType::F32, base + norm_bytes + out_bytes, 1, w.rope_freqs.n_cols};

    // Layers kept on the device: read from the file into a pinned buffer, then copied over.
    const Residency& r = store.residency();
    layers.resize(hp.n_layer);
    layer_bufs.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il)
        if (!r.cpu(il)) check_types(*dev, w.layers[il], il);
    if (hp.moe.enabled()) return load_attention_weights();
    uint64_t largest = 0;
    for (int il = 0; il < hp.n_layer; ++il)
        if (r.device(il)) largest = std::max(largest, store.layer_range(il).length);
    if (largest > 0) {
        storage::PinnedBuffer buf(dram, largest, "device load buffer");
        for (int il = 0; il < hp.n_layer; ++il) {
            if (!r.device(il)) continue;
            const uint64_t bytes = store.layer_range(il).length;
            layer_bufs[il] = dev->memory().allocate(bytes, fmt::format("layer {}'s weights", il));
            store.read_layer(il, buf.data());
            dev->copy_h2d(layer_bufs[il].data(), buf.data(), bytes, *h2d);
            h2d->synchronize();  // the buffer is reused for the next layer
            layers[il] = rebase(store, il, w.layers[il], layer_bufs[il].as<std::byte>());
        }
    }
    h2d->synchronize();
}

}  // namespace strata::runtime

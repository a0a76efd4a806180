// Weights on the device: the output head, the layers the plan keeps there (read once at load
// through a pinned buffer), and the rebasing of a streamed layer's tensors into its slot.
#include "runtime/exec/device/device_impl.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"
#include "storage/file_io.h"
#include "storage/pinned_pool.h"

namespace strata::runtime {

DevLayer rebase(const WeightStore& store, int il, const LayerWeights& l, const std::byte* base) {
    DevLayer d;
    for (size_t i = 0; i < LayerWeights::kCount; ++i)
        if (const WeightRef& w = l.*LayerWeights::kAll[i])
            d.w[i] = {w.type, base + store.offset_in_layer(il, w), w.n_rows, w.n_cols};
    return d;
}

namespace {

bool is_matrix(LayerWeights::Member m) {
    return std::find(std::begin(LayerWeights::kMatrices), std::end(LayerWeights::kMatrices), m) != std::end(LayerWeights::kMatrices);
}

// The device's matmuls read each matrix the device computes with in its type; every other
// tensor (norms, biases) is f32. A mixture of experts' router and experts run on the host.
void check_types(const gpu::Device& dev, const models::Hparams& hp, const LayerWeights& l, int il) {
    for (LayerWeights::Member m : LayerWeights::kAll) {
        const WeightRef& w = l.*m;
        if (!w || (hp.moe.enabled() && expert_tensor(m))) continue;
        if (is_matrix(m) && !dev.supports_weight(w.type))
            throw BackendError(fmt::format("layer {} has {} weights, which {}'s kernels do not read", il, dtype_name(w.type),
                                           dev.name()),
                               "run this model on the CPU (--device cpu)");
        if (!is_matrix(m) && w.type != DType::F32)
            throw BackendError(fmt::format("layer {} has a {} norm or bias; the device path expects f32", il, dtype_name(w.type)),
                               "run this model on the CPU (--device cpu)");
    }
}

}  // namespace

void DeviceBackend::Impl::load_weights(storage::MemoryBudget& dram) {
    const ModelWeights& w = store.weights();
    if (!dev->supports_weight(w.output.type))
        throw BackendError(fmt::format("the output head is {}, which {}'s kernels do not read", dtype_name(w.output.type),
                                       dev->name()),
                           "run this model on the CPU (--device cpu)");
    // The head: output norm, output matrix and RoPE's frequency factors in one buffer.
    const WeightRef* factors[] = {nullptr, &w.rope_freqs, &w.rope_long, &w.rope_short};  // by RopeFactors
    const uint64_t norm_bytes = storage::align_up(w.output_norm.info->nbytes, 256);
    const uint64_t out_bytes = storage::align_up(w.output.info->nbytes, 256);
    uint64_t factor_bytes = 0;
    for (const WeightRef* f : factors)
        if (f && *f) factor_bytes += storage::align_up(f->bytes(), 256);
    head_buf = dev->memory().allocate(norm_bytes + out_bytes + factor_bytes, "the output head");
    auto* base = head_buf.as<std::byte>();
    dev->copy_h2d(base, w.output_norm.data, w.output_norm.info->nbytes, *h2d);
    dev->copy_h2d(base + norm_bytes, w.output.data, w.output.info->nbytes, *h2d);
    output_norm = {DType::F32, base, 1, hp.n_embd};
    output = {w.output.type, base + norm_bytes, w.output.n_rows, w.output.n_cols};
    std::byte* at = base + norm_bytes + out_bytes;
    for (size_t i = 0; i < std::size(factors); ++i) {
        if (!factors[i] || !*factors[i]) continue;
        dev->copy_h2d(at, factors[i]->data, factors[i]->bytes(), *h2d);
        rope_factors[i] = {DType::F32, at, 1, factors[i]->n_cols};
        at += storage::align_up(factors[i]->bytes(), 256);
    }

    // Layers kept on the device: read from the file into a pinned buffer, then copied over.
    const Residency& r = store.residency();
    layers.resize(hp.n_layer);
    layer_bufs.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il)
        if (!r.cpu(il) || hp.moe.enabled()) check_types(*dev, hp, w.layers[il], il);
    if (hp.moe.enabled()) return load_non_expert_weights();
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

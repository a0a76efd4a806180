// A mixture of experts on the device backend, as llama.cpp's `-ngl 99 --override-tensor
// exps=CPU` and KTransformers run one: attention, its norms (QK-norm too) and the KV cache on the
// device; each layer's feed-forward (its norm, the router, the routed experts, resident in DRAM
// or read through the expert cache, and any shared experts) on the host with the CPU's own code
// (runtime/exec/ffn_moe.h), so the tokens are the CPU's. The hidden states cross the link twice
// per layer: n_embd floats per token down, the same back up.
#include "runtime/exec/device_impl.h"

#include <fmt/format.h>

#include "core/log.h"
#include "storage/file_io.h"

namespace strata::runtime {

namespace {

// The tensors a layer's attention reads on the device, with where they go in its DevLayer.
struct AttentionTensor {
    LayerWeights::Member host;
    DevWeight DevLayer::*device;
};
constexpr AttentionTensor kAttention[] = {
    {&LayerWeights::attn_norm, &DevLayer::attn_norm}, {&LayerWeights::wq, &DevLayer::wq},
    {&LayerWeights::wk, &DevLayer::wk},               {&LayerWeights::wv, &DevLayer::wv},
    {&LayerWeights::wo, &DevLayer::wo},               {&LayerWeights::bq, &DevLayer::bq},
    {&LayerWeights::bk, &DevLayer::bk},               {&LayerWeights::bv, &DevLayer::bv},
    {&LayerWeights::q_norm, &DevLayer::q_norm},       {&LayerWeights::k_norm, &DevLayer::k_norm}};

constexpr uint64_t kTensorAlign = 256;

// Where each of the layer's attention tensors starts in its device buffer; the last entry is
// the buffer's size.
std::vector<uint64_t> attention_offsets(const LayerWeights& l) {
    std::vector<uint64_t> at;
    uint64_t end = 0;
    for (const AttentionTensor& t : kAttention) {
        at.push_back(end);
        if (const WeightRef& w = l.*t.host) end = storage::align_up(end + w.bytes(), kTensorAlign);
    }
    at.push_back(end);
    return at;
}

}  // namespace

uint64_t DeviceBackend::attention_bytes(const ModelWeights& w) {
    uint64_t total = 0;
    for (const LayerWeights& l : w.layers) total += attention_offsets(l).back();
    return total;
}

void DeviceBackend::Impl::load_attention_weights() {
    layers.assign(hp.n_layer, {});
    layer_bufs.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = store.acquire(il);
        const std::vector<uint64_t> at = attention_offsets(l);
        layer_bufs[il] = dev->memory().allocate(at.back(), fmt::format("layer {}'s attention weights", il));
        auto* base = layer_bufs[il].as<std::byte>();
        for (size_t i = 0; i < std::size(kAttention); ++i) {
            const WeightRef& w = l.*kAttention[i].host;
            if (!w) continue;
            dev->copy_h2d(base + at[i], w.data, w.bytes(), *h2d);
            layers[il].*kAttention[i].device = {w.type, base + at[i], w.n_rows, w.n_cols};
        }
        h2d->synchronize();  // the host's view of the layer lasts until its release
        store.release(il);
    }
    STRATA_LOG_INFO("{}: every layer's attention on the device, its experts' feed-forward on the host", dev->name());
}

void DeviceBackend::Impl::ffn_on_host(int il, const PassLayout& p) {
    on_host(p, [&] { host_layers->run_feed_forward(il, p); });
}

}  // namespace strata::runtime

// A mixture of experts on the device backend, as llama.cpp's `-ngl 99 --override-tensor
// exps=CPU` and KTransformers run one: every step of each layer's program on the device
// (attention, its norms and the KV cache too) but the experts: the router, the routed experts
// (resident in DRAM or read through the expert cache) and any shared experts run on the host
// with the CPU's own code (runtime/exec/cpu/ffn_moe.h), so the tokens are the CPU's. The
// feed-forward's normed input goes down, n_embd floats per token, and its output comes back up.
#include "runtime/exec/device/device_impl.h"

#include <fmt/format.h>

#include "core/log.h"
#include "storage/file_io.h"

namespace strata::runtime {

bool expert_tensor(LayerWeights::Member m) {
    for (LayerWeights::Member e : {&LayerWeights::ffn_gate_inp, &LayerWeights::ffn_gate_exps, &LayerWeights::ffn_up_exps,
                                   &LayerWeights::ffn_down_exps, &LayerWeights::ffn_gate_shexp, &LayerWeights::ffn_up_shexp,
                                   &LayerWeights::ffn_down_shexp})
        if (m == e) return true;
    return false;
}

namespace {

constexpr uint64_t kTensorAlign = 256;

// Where each of the layer's device tensors starts in its buffer (by its place in
// LayerWeights::kAll); the last entry is the buffer's size.
std::vector<uint64_t> device_offsets(const LayerWeights& l) {
    std::vector<uint64_t> at;
    uint64_t end = 0;
    for (LayerWeights::Member m : LayerWeights::kAll) {
        at.push_back(end);
        if (const WeightRef& w = l.*m; w && !expert_tensor(m)) end = storage::align_up(end + w.bytes(), kTensorAlign);
    }
    at.push_back(end);
    return at;
}

}  // namespace

uint64_t DeviceBackend::Impl::non_expert_bytes(const ModelWeights& w) {
    uint64_t total = 0;
    for (const LayerWeights& l : w.layers) total += device_offsets(l).back();
    return total;
}

void DeviceBackend::Impl::load_non_expert_weights() {
    layers.assign(hp.n_layer, {});
    layer_bufs.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = store.acquire(il);
        const std::vector<uint64_t> at = device_offsets(l);
        layer_bufs[il] = dev->memory().allocate(at.back(), fmt::format("layer {}'s weights but its experts", il));
        auto* base = layer_bufs[il].as<std::byte>();
        for (size_t i = 0; i < LayerWeights::kCount; ++i) {
            const WeightRef& w = l.*LayerWeights::kAll[i];
            if (!w || expert_tensor(LayerWeights::kAll[i])) continue;
            dev->copy_h2d(base + at[i], w.data, w.bytes(), *h2d);
            layers[il].w[i] = {w.type, base + at[i], w.n_rows, w.n_cols};
        }
        h2d->synchronize();  // the host's view of the layer lasts until its release
        store.release(il);
    }
    STRATA_LOG_INFO("{}: every layer on the device but its experts, which the host computes", dev->name());
}

void DeviceBackend::Impl::experts_on_host(int il, const PassLayout& p, const float* in, float* out) {
    on_host(p, in, host_layers->act(Act::XN), [&] { host_layers->run_experts(il, p); }, host_layers->act(Act::Out), out);
}

}  // namespace strata::runtime

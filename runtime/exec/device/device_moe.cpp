// A mixture of experts on the device backend, as llama.cpp's `-ngl 99 --override-tensor
// exps=CPU` and KTransformers run one: every step of each layer's program on the device
// (attention, its norms and the KV cache too) but the experts: the router, the routed experts
// (resident in DRAM or read through the expert cache) and any shared experts run on the host
// with the CPU's own code (runtime/exec/cpu/ffn_moe.h), so the tokens are the CPU's. The
// feed-forward's normed input goes down, n_embd floats per token, and its output comes back up.
// A prompt's long pass may copy the layers in and compute their routed experts here (op offload,
// below).
#include "runtime/exec/device/device_impl.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "runtime/weights/expert_cache.h"
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
    on_host(
        p, in, host_layers->act(Act::XN),
        [&] {
            const TraceScope traced(trace, cpu_layer_track, trace ? fmt::format("layer {} experts", il) : std::string());
            host_layers->run_experts(il, p);
        },
        host_layers->act(Act::Out), out);
}

void DeviceBackend::Impl::make_device_experts(const std::vector<std::vector<int32_t>>& held) {
    experts = std::make_unique<DeviceExperts>(*dev, *compute, rows_stream(), *d2h, hp, store.file(), store.weights().layers,
                                              held, dram);
    host_layers->set_remote_experts(experts.get());
}

// Op offload of a mixture of experts (llama.cpp's, for a large batch): a prompt's long pass
// copies each layer whose experts the host holds in DRAM into a slot on the device, as the file
// lays it out (rebuilt from the CPU's tiles), and computes every routed expert of the layer there
// (DeviceExperts::borrow_layer; those it holds from its own copy); the router and any shared
// experts stay on the host. The host rebuilds a layer (or waits for its read) while it waits for
// the device's experts of the layer before (run_schedule), and the link's copy overlaps the
// device's compute of that layer and the layer's own attention. Layers whose experts come through
// the expert cache stay on the host: their copy would be a read of every expert from the disk;
// and those whose every expert the device holds have nothing to copy.
std::vector<int> DeviceBackend::Impl::expert_offload_layers() const {
    std::vector<int> out;
    if (hp.ffn_act == models::FfnAct::GeluTanh) return out;  // DeviceExperts runs gated SiLU experts
    const ExpertCache* cache = store.expert_cache();
    for (int il = 0; il < hp.n_layer; ++il) {
        const LayerWeights& l = store.weights().layers[il];
        if (!l.ffn_gate_exps || !store.residency().resident[il] || (cache && cache->holds(il))) continue;
        const bool all_held = size_t(il) < opts.experts.size() && opts.experts[size_t(il)].size() >= size_t(hp.moe.n_expert);
        if (all_held) continue;
        // The device's kernels read each expert's type, from 16-byte aligned rows of the slot.
        bool readable = true;
        for (const WeightRef* w : {&l.ffn_gate_exps, &l.ffn_up_exps, &l.ffn_down_exps})
            readable = readable && dev->supports_weight(w->type) && store.offset_in_layer(il, *w) % 16 == 0 && w->mat_bytes() % 16 == 0;
        if (readable) out.push_back(il);
    }
    return out;
}

uint64_t DeviceBackend::Impl::prepare_expert_op_offload(storage::MemoryBudget& dram) {
    // A prompt's pass attended by the host (the device reads no KV cache of its type) runs no
    // layer program of copied layers' (cpu_attention_pipeline.cpp).
    if (opts.kv == KvPlacement::HostCpuAttention && kv_k.empty()) {
        STRATA_LOG_WARN("op offload: not run: the host attends to prompts here (the device reads no KV cache of its type)");
        return 0;
    }
    std::vector<int> copied_in = expert_offload_layers();
    if (copied_in.empty()) {
        STRATA_LOG_WARN("op offload: not run: no layer's experts can be copied in (their types or alignment are not "
                        "the device kernels')");
        return 0;
    }
    STRATA_ASSERT(slots.empty());  // the device's own layers copy in through none
    std::vector<LayerWork> work(size_t(hp.n_layer));
    uint64_t slot_bytes = 0;
    for (const int il : copied_in) {
        work[size_t(il)] = {LayerSite::CopiedIn, false, /*host_built=*/true};
        slot_bytes = std::max(slot_bytes, store.layer_range(il).length);
    }
    const int n_slots = std::max(1, opts.n_slots);
    offload_schedule = layer_schedule(work, n_slots);
    try {
        for (int i = 0; i < n_slots; ++i) {
            slots.push_back(dev->memory().allocate(slot_bytes, "buffers for the layers whose experts are copied in"));
            copied.push_back(dev->make_event());
            computed.push_back(dev->make_event());
        }
        if (!experts) make_device_experts(std::vector<std::vector<int32_t>>(size_t(hp.n_layer)));
        const size_t n_layers = copied_in.size();
        const uint64_t pinned = store.stage_as_read(std::move(copied_in), n_slots, dram);
        STRATA_LOG_INFO("{}: op offload: the routed experts of {} layers copied in and computed here in prompt passes of "
                        "{}+ rows, through {} buffers of {} and {} of pinned DRAM",
                        dev->name(), n_layers, opts.op_offload_rows, n_slots, format_bytes(slot_bytes), format_bytes(pinned));
        return pinned;
    } catch (const OutOfBudget& e) {
        return op_offload_failed(e, "the experts prefill on the host");
    }
}

void DeviceBackend::Impl::drop_expert_op_offload() {
    if (!hp.moe.enabled()) return;
    slots.clear();
    copied.clear();
    computed.clear();
    if (experts && experts->n_held() == 0) {  // made for op offload alone
        host_layers->set_remote_experts(nullptr);
        expert_choices_before += experts->choices();
        offloaded_choices_before += experts->offloaded_choices();
        experts.reset();
    }
}

}  // namespace strata::runtime

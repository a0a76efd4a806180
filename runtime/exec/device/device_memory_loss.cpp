// Device memory taken away mid-run (another program allocates, or a pass needs more of the
// pool than is free): between passes the held routed experts go back to the host (which holds
// every expert and computes them), then the layers the device can no longer hold move to the
// CPU, their KV cache copied down into the host's cache, so the run goes on with the same tokens.
#include <algorithm>
#include <numeric>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/log.h"
#include "runtime/exec/device/device_impl.h"

namespace strata::runtime {

void DeviceBackend::Impl::fit_memory(KvCache& kv) {
    const uint64_t limit = dev->poll_memory();
    if (dev->memory().arena().used() <= limit) return;
    give_back(limit, kv, fmt::format("device memory shrank to {}", format_bytes(limit)));
}

int DeviceBackend::Impl::layer_to_move() const {
    // A mixture of experts keeps every layer's attention on the device: nothing to move.
    if (hp.moe.enabled()) return -1;
    const std::vector<LayerWork> work = layer_work();
    // The last layers first, so that the CPU's layers stay one run (one hop each way).
    for (const LayerSite site : {LayerSite::Device, LayerSite::CopiedIn})
        for (int il = hp.n_layer - 1; il >= 0; --il)
            if (work[il].site == site) return il;
    return -1;
}

void DeviceBackend::Impl::give_back(uint64_t target, KvCache& kv, const std::string& why) {
    // Nothing queued may still read what is freed below.
    for (gpu::Stream* s : {compute.get(), h2d.get(), d2h.get(), rows_up.get()})
        if (s) s->synchronize();
    graphs.clear();  // recorded over the old schedule
    const gpu::DeviceArena& arena = dev->memory().arena();
    const uint64_t before = arena.used();
    std::vector<int> moved;
    ++memory_losses;
    // Op offload goes first: a faster prefill, not a layer; and the layers moved below are not
    // among those it copies, so its schedule would not hold.
    const bool offloaded = !offload_schedule.empty();
    drop_op_offload();
    // Held experts next: copies of what the host holds, so nothing moves but their compute.
    std::vector<int> experts_of;
    const int held_before = experts ? experts->n_held() : 0;
    while (arena.used() > target && experts) {
        const int il = experts->give_back_last_layer();
        if (il < 0) break;
        experts_of.push_back(il);
    }
    const int held_after = experts ? experts->n_held() : 0;
    experts_given_back += held_before - held_after;
    if (experts && held_after == 0) {  // their scratch and staging go too
        host_layers->set_remote_experts(nullptr);
        expert_choices_before += experts->choices();
        offloaded_choices_before += experts->offloaded_choices();
        experts.reset();
    }
    while (arena.used() > target) {
        const int il = layer_to_move();
        if (il < 0) {
            // A mixture of experts keeps every layer's attention here.
            const bool moe = hp.moe.enabled();
            throw DeviceOutOfMemory(fmt::format("{}: {}, and with every {} the device backend still holds {} ({}the output "
                                                "head, activations and scratch)",
                                                dev->name(), why, moe ? "routed expert on the host" : "layer on the CPU",
                                                format_bytes(arena.used()),
                                                moe ? "every layer's attention, the KV cache where it is there, " : ""),
                                    "restart with a smaller --gpu-mem, or on the CPU (--device cpu)");
        }
        move_to_cpu(il, kv);
        moved.push_back(il);
        ++layers_moved;
    }
    const std::vector<LayerWork> work = layer_work();
    if (std::none_of(work.begin(), work.end(), [](const LayerWork& w) { return w.site == LayerSite::CopiedIn; })) {
        slots.clear();
        copied.clear();
        computed.clear();
    }
    schedule = layer_schedule(work, std::max(1, static_cast<int>(slots.size())));
    std::vector<std::string> done;
    if (offloaded) done.push_back("op offload stopped (prompts prefill the CPU layers there)");
    if (!experts_of.empty())
        done.push_back(fmt::format("the routed experts held for layers {} given back to the host ({} left on the device)",
                                   fmt::join(experts_of, ", "), held_after));
    if (!moved.empty()) done.push_back(fmt::format("layers {} moved to the CPU with their KV cache", fmt::join(moved, ", ")));
    STRATA_LOG_WARN("{}: {}; {}, {} freed ({} of device memory in use)", dev->name(), why, fmt::join(done, ", "),
                    format_bytes(before - arena.used()), format_bytes(arena.used()));
}

void DeviceBackend::hand_kv_to_host(KvCache& kv) {
    Impl& m = *impl_;
    for (gpu::Stream* s : {m.compute.get(), m.h2d.get(), m.d2h.get(), m.rows_up.get()})
        if (s) s->synchronize();
    if (m.opts.kv != KvPlacement::Device) return;  // the host's cache is the KV cache
    for (int il = 0; il < hp_.n_layer; ++il) {
        // A layer on the CPU from the start or moved there since holds its KV in the host's cache.
        if (m.store.residency().cpu(il)) continue;
        if (m.hidden_slot[il] >= 0 || m.kv_k[m.kv_slot[il]].data()) m.kv_down(il, kv);
    }
}

void DeviceBackend::Impl::move_to_cpu(int il, KvCache& kv) {
    const bool on_device = store.residency().device(il);
    const uint64_t host_kv_before = kv.layers_bytes(store.residency().on_cpu);
    // DRAM first: when it cannot hold the layer, nothing has moved.
    store.run_on_cpu(il);
    if (opts.kv == KvPlacement::Device) {
        kv_down(il, kv);
        // Its K/V rows or saved hidden states (and, for the first rebuilt layer to move, the pair
        // the rebuilt layers share).
        moved_kv.push_back(storage::Reservation::or_warn(dram, kv.layers_bytes(store.residency().on_cpu) - host_kv_before,
                                                         fmt::format("layer {}'s KV cache, moved from the device", il)));
    }
    if (on_device) layer_bufs[il].reset();
    layers[il] = {};
    host_layers_needed();
}

void DeviceBackend::Impl::kv_down(int il, KvCache& kv) {
    const int32_t n_blocks = kv.pool().n_blocks();
    const bool saved_hidden = hidden_slot[il] >= 0;
    // Every block, used or not: the copy is a one-off and the host's blocks are the device's.
    kv.begin_layer(il);
    for (int32_t b = 0; b < n_blocks; ++b) {
        if (saved_hidden) {
            const int64_t bytes = KvCache::kBlockSize * hidden_row_bytes;
            dev->copy_d2h(kv.hidden(il, b), hidden[hidden_slot[il]].as<std::byte>() + b * bytes, size_t(bytes), *d2h);
            continue;
        }
        const int32_t slot = kv_slot[il];
        dev->copy_d2h(kv.k(il, b), kv_k[slot].as<std::byte>() + b * kv_block_bytes, size_t(kv_block_bytes), *d2h);
        if (kv_v[slot].data())
            dev->copy_d2h(kv.v(il, b), kv_v[slot].as<std::byte>() + b * kv_block_bytes, size_t(kv_block_bytes), *d2h);
    }
    d2h->synchronize();
    std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
    std::iota(blocks.begin(), blocks.end(), 0);
    kv.end_layer(il, blocks);
    // The shared pair of rebuilt layers stays for the others; a layer's own pair goes.
    if (saved_hidden) {
        hidden[hidden_slot[il]].reset();
        hidden_slot[il] = -1;
    } else {
        kv_k[kv_slot[il]].reset();
        kv_v[kv_slot[il]].reset();
    }
}

}  // namespace strata::runtime

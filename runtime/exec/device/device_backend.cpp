#include "runtime/exec/device/device_backend.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"
#include "runtime/exec/device/device_impl.h"

namespace strata::runtime {

namespace {
// What the devices do not run yet: latent attention on the host CPU for a device
// (--kv-cache host-cpu-attention).
const gpu::Device& refuse_unported(const gpu::Device& dev, const models::Hparams& hp, const DeviceBackendOptions& opts) {
    if (hp.mla.enabled() && opts.kv == KvPlacement::HostCpuAttention)
        throw UsageError("latent attention (deepseek2) does not run with the host CPU attending for the device",
                         "leave out --attention cpu: the device then attends to the KV cache, on the device or in DRAM");
    return dev;
}
}  // namespace

DeviceBackend::DeviceBackend(std::unique_ptr<gpu::Device> device, const models::Hparams& hp, WeightStore& weights,
                             const KvCache& kv, storage::MemoryBudget& dram, const DeviceBackendOptions& opts)
    : Backend(hp), impl_((refuse_unported(*device, hp, opts), std::make_unique<Impl>(std::move(device), hp, weights, kv, dram, opts))) {}

DeviceBackend::~DeviceBackend() = default;

std::string_view DeviceBackend::name() const { return impl_->dev->name(); }
uint64_t DeviceBackend::graph_launches() const { return impl_->graph_launches; }

void DeviceBackend::set_trace(Trace* trace) {
    impl_->dev->set_trace(trace);
    impl_->trace = trace;
    if (!trace) return;
    impl_->attention_track = trace->track("cpu: attention");
    impl_->cpu_layer_track = trace->track("cpu: layers");
}

const RoutingStats* DeviceBackend::routing_stats() const {
    return impl_->host_layers ? impl_->host_layers->routing_stats() : nullptr;
}

Backend::DeviceMemory DeviceBackend::device_memory() const {
    const gpu::DeviceArena& arena = impl_->dev->memory().arena();
    const uint64_t choices = impl_->expert_choices_before + (impl_->experts ? impl_->experts->choices() : 0);
    const uint64_t offloaded = impl_->offloaded_choices_before + (impl_->experts ? impl_->experts->offloaded_choices() : 0);
    return {arena.used(), arena.limit(), impl_->memory_losses, impl_->layers_moved, impl_->experts_given_back, choices, offloaded};
}

std::vector<std::vector<int32_t>> DeviceBackend::device_experts() const {
    return impl_->experts ? impl_->experts->held() : std::vector<std::vector<int32_t>>{};
}

void DeviceBackend::reserve(int64_t) {}  // everything is sized for kMaxUbatch tokens at construction

// Between passes the device may have lost memory; a pass that finds the pool too small gives
// back a layer and runs again (what it wrote is written again, nothing committed yet).
void DeviceBackend::compute(const PassLayout& p, KvCache& kv) {
    Impl& m = *impl_;
    m.fit_memory(kv);
    // What the pass counts of its routing, counted once however often it runs.
    const RoutingStats* routing = routing_stats();
    if (routing) routing->save(m.routed_before_pass);
    const uint64_t held = m.experts ? m.experts->choices() : 0, offloaded = m.experts ? m.experts->offloaded_choices() : 0;
    for (;;) {
        try {
            return m.run_pass(p, kv);
        } catch (const DeviceOutOfMemory& e) {
            // At least a layer or a layer's held experts go each time, or give_back says none is left.
            const uint64_t used = m.dev->memory().arena().used();
            if (used == 0) throw;
            if (routing) m.host_layers->restore_routing(m.routed_before_pass);
            if (m.experts) m.experts->reset_choices(held, offloaded);
            m.give_back(used - 1, kv, e.what());
        }
    }
}

void DeviceBackend::Impl::run_pass(const PassLayout& p, KvCache& kv) {
    upload_pass(p, kv);
    if (host_layers) host_layers->begin_pass(p, kv);
    if (gpu::Graph* g = step_graph(p, kv)) {
        g->launch(*compute);
        ++graph_launches;
        return;
    }
    // With the KV cache in DRAM the CPU attends to decode steps, beside the device's matmuls; a
    // prompt's causal attention is compute-bound and stays on the device (as NEO and FastDecode
    // keep prefill there), over the blocks it reads copied in.
    host_attends = opts.kv == KvPlacement::HostCpuAttention && (p.n_long == 0 || kv_k.empty());
    if (host_attends) run_with_cpu_attention(p, kv);
    else run_schedule(p, kv);
}

const std::vector<PipelineStep>& DeviceBackend::Impl::schedule_for(const PassLayout& p) const {
    const bool offload = !offload_schedule.empty() && p.n_long > 0 && p.n() >= opts.op_offload_rows;
    return offload ? offload_schedule : schedule;
}

void DeviceBackend::Impl::run_schedule(const PassLayout& p, KvCache& kv) {
    const std::vector<PipelineStep>& steps = schedule_for(p);
    // A mixture of experts' copies (op offload's) wait for the next layer's compute: the host
    // waits there for the device's experts and rebuilds the layers to copy in meanwhile, where
    // before that compute the device would have nothing to do.
    std::vector<PipelineStep> ahead;
    auto copy_ahead = [&](size_t n) {
        for (size_t k = 0; k < n; ++k) copy_in(ahead[k]);
        ahead.erase(ahead.begin(), ahead.begin() + static_cast<std::ptrdiff_t>(n));
    };
    for (size_t i = 0; i < steps.size(); ++i) {
        const PipelineStep& step = steps[i];
        if (step.kind == PipelineStep::CpuCompute) {
            copy_ahead(ahead.size());
            i = layers_on_cpu(steps, i, p, kv) - 1;
            continue;
        }
        if (step.kind == PipelineStep::Copy) {
            if (hp.moe.enabled()) ahead.push_back(step);
            else copy_in(step);
            continue;
        }
        // The layer's own copy (and any before it) now.
        const auto own = std::find_if(ahead.begin(), ahead.end(), [&](const PipelineStep& c) { return c.layer == step.layer; });
        if (own != ahead.end()) copy_ahead(static_cast<size_t>(own - ahead.begin()) + 1);
        // A mixture of experts' layer copied in: the device computes its routed experts from the
        // slot, the first of them once the copy is done (its attention reads none of the slot).
        DeviceExperts* lent = hp.moe.enabled() && step.slot >= 0 ? experts.get() : nullptr;
        if (lent)
            lent->borrow_layer(step.layer, store.weights().layers[step.layer], slots[step.slot].as<std::byte>(),
                               [&](const WeightRef& w) { return store.offset_in_layer(step.layer, w); }, *copied[step.slot]);
        else if (step.slot >= 0)
            copied[step.slot]->wait_on(*compute);
        if (experts && !ahead.empty()) experts->meanwhile([&] { copy_ahead(ahead.size()); });
        const struct LendBack {
            DeviceExperts* x;
            DeviceExperts* waiting;
            ~LendBack() {
                if (x) x->lend_back();
                if (waiting) waiting->meanwhile(nullptr);
            }
        } lend_back{lent, experts.get()};
        layer(step.layer, layers[step.layer], p, kv);
        copy_ahead(ahead.size());  // those of a layer that never waited for the device's experts
        if (step.slot >= 0) computed[step.slot]->record(*compute);
    }
}

bool DeviceBackend::op_offloads() const { return !impl_->offload_schedule.empty(); }

gpu::Stream& DeviceBackend::Impl::rows_stream() {
    if (!rows_up) rows_up = dev->make_stream("rows h2d");
    return *rows_up;
}

void DeviceBackend::Impl::copy_in(const PipelineStep& step) {
    // The slot's previous layer must be done before its weights are overwritten.
    computed[step.slot]->wait_on(*h2d);
    // A resident CPU layer is in the CPU kernels' tiles; the device's kernels read the file's
    // layout, which the store gives back for op offload (WeightStore::acquire_as_read).
    // (A mixture of experts' layer copied in is one of those: its experts are the CPU's.)
    const bool as_read = (hp.moe.enabled() || store.residency().cpu(step.layer)) && store.residency().resident[step.layer];
    // (A mixture's copy runs inside the host's feed-forward, which holds the store's view of its
    // layer: only layers held in DRAM are copied in, which take none.)
    STRATA_ASSERT(as_read || !hp.moe.enabled());
    // A layer rebuilt from DRAM goes into the store's buffers in turn: the copy out of the one it
    // takes (its slot's event, or a later copy's on the same stream) must be done first.
    const bool rebuilt = as_read && store.rebuilds(step.layer);
    const int buffer = rebuilt ? store.next_rebuild_buffer() : -1;
    if (rebuilt) {
        if (size_t(buffer) >= rebuild_copies.size()) rebuild_copies.resize(size_t(buffer) + 1, -1);
        if (const int slot = rebuild_copies[size_t(buffer)]; slot >= 0) copied[slot]->synchronize();
    }
    // Sent in pieces as a layer rebuilt from DRAM becomes ready: its copy overlaps its rebuild.
    uint64_t sent = 0;
    auto send = [&](WeightStore::HostRange ready) {
        if (ready.length <= sent) return;
        dev->copy_h2d(slots[step.slot].as<std::byte>() + sent, ready.data + sent, ready.length - sent, *h2d);
        sent = ready.length;
    };
    bool held = false;  // the store's view of the layer, given back below
    auto give_back = [&] {
        if (as_read) store.release_as_read();
        else store.release(step.layer);
    };
    try {
        if (!as_read) store.acquire(step.layer), held = true;
        const WeightStore::HostRange range = as_read ? store.acquire_as_read(step.layer, send) : store.layer_range(step.layer);
        held = true;
        send(range);
        copied[step.slot]->record(*h2d);
        // A rebuilt layer's buffer is waited for when it is taken again, so that the host
        // rebuilds the next layer while this one's copy and the layer before's compute go on; a
        // pinned buffer of either ring is reused once released.
        if (rebuilt) rebuild_copies[size_t(buffer)] = step.slot;
        else if (as_read || store.residency().streamed(step.layer)) copied[step.slot]->synchronize();
    } catch (...) {
        // Pieces may be on their way out of the layer's buffer: a rebuilt one's waited for at its
        // reuse, a ring's before it goes back (as far as a failing device still answers).
        try {
            copied[step.slot]->record(*h2d);
            if (!rebuilt && held) copied[step.slot]->synchronize();
        } catch (const std::exception& e) {
            STRATA_LOG_WARN("{}: a layer's copy in failed: {}", dev->name(), e.what());
        }
        if (rebuilt) rebuild_copies[size_t(buffer)] = step.slot;
        if (held) give_back();
        throw;
    }
    give_back();
    // (A mixture of experts keeps the layer's other tensors on the device; its experts are lent
    // to DeviceExperts when it is computed.)
    if (!hp.moe.enabled())
        layers[step.layer] = rebase(store, step.layer, store.weights().layers[step.layer], slots[step.slot].as<std::byte>());
}

// A decode step whose every layer is held on the device, with its KV cache there and nothing
// for the host to do mid-pass, runs as one graph: recorded the second time a step of its row
// count comes (the first sized every scratch buffer), launched from then on. Its inputs
// (positions, KV rows, block tables, key counts) are in device buffers upload_pass rewrites.
gpu::Graph* DeviceBackend::Impl::step_graph(const PassLayout& p, KvCache& kv) {
    // One row a sequence: what the attention call is told of its rows (no prompt runs) is the
    // same for every step of this row count.
    const bool decode_rows = std::all_of(p.segments.begin(), p.segments.end(), [](const auto& seg) { return seg.n == 1; });
    const bool graphable = opts.graphs && decode_rows && opts.kv == KvPlacement::Device && hidden.empty() && !host_layers &&
                           !hp.moe.enabled() &&
                           std::all_of(schedule.begin(), schedule.end(), [](const PipelineStep& s) {
                               return s.kind == PipelineStep::Compute && s.slot < 0;
                           });
    if (!graphable) return nullptr;
    StepGraph& g = graphs[p.n()];
    if (!g.graph && ++g.seen >= 2) g.graph = dev->capture(*compute, [&] { run_schedule(p, kv); });
    return g.graph.get();
}

void DeviceBackend::norm_rows(std::span<const int64_t> rows) {
    Impl& m = *impl_;
    gpu::Stream& s = *m.compute;
    const int64_t E = hp_.n_embd;
    for (size_t i = 0; i < rows.size(); ++i) m.dev->copy_d2d(m.dev_f(m.xn, int64_t(i), E), m.dev_f(m.x, rows[i], E), size_t(E) * 4, s);
    m.dev->rms_norm(m.xn.as<float>(), m.output_norm.f32(), m.xn.as<float>(), int64_t(rows.size()), E, hp_.rms_eps, s);
}

void DeviceBackend::hidden(std::span<const int64_t> rows, float* out) { final_rows(rows, /*project=*/false, out); }

void DeviceBackend::head(std::span<const int64_t> rows, float* logits, int64_t) { final_rows(rows, /*project=*/true, logits); }

void DeviceBackend::final_rows(std::span<const int64_t> rows, bool project, float* out) {
    Impl& m = *impl_;
    gpu::Stream& s = *m.compute;
    const int64_t width = project ? hp_.n_vocab : hp_.n_embd;
    for (size_t r0 = 0; r0 < rows.size(); r0 += Impl::kHeadRows) {
        const int64_t nr = std::min<int64_t>(Impl::kHeadRows, int64_t(rows.size() - r0));
        const std::span<const int64_t> part = rows.subspan(r0, size_t(nr));
        // Consecutive rows (a decode step's, a prompt's last) go into the head straight from the
        // stream, normed on their way in: one launch where gathering and norming them take nr + 1
        // more. A row's logits do not depend on the others: each as a product of that row alone.
        bool consecutive = project;
        for (int64_t i = 1; consecutive && i < nr; ++i) consecutive = part[size_t(i)] == part[0] + i;
        if (consecutive) {
            const MatmulOutput head{m.output, m.logits.as<float>()};
            const MatmulInput in{m.dev_f(m.x, part[0], hp_.n_embd), m.output_norm.f32(), hp_.rms_eps};
            runtime::project(*m.dev, s, in, std::span(&head, 1), nr, 0);
        } else {
            norm_rows(part);
            if (project) m.project(m.output, m.xn.as<float>(), m.logits.as<float>(), nr, 0);
        }
        if (project && hp_.final_softcap > 0) m.dev->softcap(m.logits.as<float>(), nr * width, hp_.final_softcap, s);
        // Hidden states are staged through the logits' host buffer too: kHeadRows rows of n_vocab >= n_embd floats.
        m.dev->copy_d2h(m.host->logits, project ? m.logits.data() : m.xn.data(), size_t(nr * width) * 4, s);
        m.ev_logits->record(s);
        m.ev_logits->synchronize();
        std::memcpy(out + r0 * width, m.host->logits, size_t(nr * width) * 4);
    }
    m.dev->collect_trace();  // the step is done: its timed work goes into the trace
}

}  // namespace strata::runtime

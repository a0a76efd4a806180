#include "runtime/exec/device/device_backend.h"

#include <algorithm>
#include <cstring>

#include "core/trace.h"
#include "runtime/exec/device/device_impl.h"

namespace strata::runtime {

DeviceBackend::DeviceBackend(std::unique_ptr<gpu::Device> device, const models::Hparams& hp, WeightStore& weights,
                             const KvCache& kv, storage::MemoryBudget& dram, const DeviceBackendOptions& opts)
    : Backend(hp), impl_(std::make_unique<Impl>(std::move(device), hp, weights, kv, dram, opts)) {}

DeviceBackend::~DeviceBackend() = default;

std::string_view DeviceBackend::name() const { return impl_->dev->name(); }

void DeviceBackend::set_trace(Trace* trace) {
    impl_->dev->set_trace(trace);
    impl_->trace = trace;
    if (trace) impl_->attention_track = trace->track("cpu: attention");
}

const RoutingStats* DeviceBackend::routing_stats() const {
    return impl_->host_layers ? impl_->host_layers->routing_stats() : nullptr;
}

Backend::DeviceMemory DeviceBackend::device_memory() const {
    const gpu::DeviceArena& arena = impl_->dev->memory().arena();
    return {arena.used(), arena.capacity()};
}

void DeviceBackend::reserve(int64_t) {}  // everything is sized for kMaxUbatch tokens at construction

void DeviceBackend::compute(const PassLayout& p, KvCache& kv) {
    Impl& m = *impl_;
    m.upload_pass(p, kv);
    if (m.host_layers) m.host_layers->begin_pass(p, kv);
    for (const PipelineStep& step : m.schedule) {
        if (step.kind == PipelineStep::CpuCompute) {
            m.layer_on_cpu(step.layer, p, kv);
            continue;
        }
        if (step.kind == PipelineStep::Copy) {
            // The slot's previous layer must be done before its weights are overwritten.
            m.computed[step.slot]->wait_on(*m.h2d);
            m.store.acquire(step.layer);
            const WeightStore::HostRange r = m.store.layer_range(step.layer);
            m.dev->copy_h2d(m.slots[step.slot].data(), r.data, r.length, *m.h2d);
            m.copied[step.slot]->record(*m.h2d);
            // A layer streamed from NVMe sits in a ring buffer the store reuses once released.
            if (m.store.residency().streamed(step.layer)) m.copied[step.slot]->synchronize();
            m.store.release(step.layer);
            m.layers[step.layer] = rebase(m.store, step.layer, m.store.weights().layers[step.layer],
                                          m.slots[step.slot].as<std::byte>());
            continue;
        }
        if (step.slot >= 0) m.copied[step.slot]->wait_on(*m.compute);
        m.layer(step.layer, m.layers[step.layer], p, kv);
        if (step.slot >= 0) m.computed[step.slot]->record(*m.compute);
    }
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
        norm_rows(rows.subspan(r0, size_t(nr)));
        // A row's logits do not depend on the others: each as a product of that row alone.
        if (project) m.project(m.output, m.xn.as<float>(), m.logits.as<float>(), nr, 0);
        if (project && hp_.final_softcap > 0) m.dev->softcap(m.logits.as<float>(), nr * width, hp_.final_softcap, s);
        // Hidden states are staged through the logits' host buffer too: kHeadRows rows of n_vocab >= n_embd floats.
        m.dev->copy_d2h(m.host->logits, project ? m.logits.data() : m.xn.data(), size_t(nr * width) * 4, s);
        m.ev_logits->record(s);
        m.ev_logits->synchronize();
        std::memcpy(out + r0 * width, m.host->logits, size_t(nr * width) * 4);
    }
}

}  // namespace strata::runtime

#include "runtime/exec/device/device_experts.h"

#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "models/gguf_file.h"
#include "runtime/weights/residency.h"
#include "storage/file_io.h"

namespace strata::runtime {

namespace {

constexpr uint64_t kAlign = 256;
constexpr LayerWeights::Member kParts[] = {&LayerWeights::ffn_gate_exps, &LayerWeights::ffn_up_exps,
                                           &LayerWeights::ffn_down_exps};
// Each part's bias, one row per expert (gpt-oss).
constexpr LayerWeights::Member kBiases[] = {&LayerWeights::ffn_gate_exps_b, &LayerWeights::ffn_up_exps_b,
                                            &LayerWeights::ffn_down_exps_b};

// Expert e's matrix of `w` as laid out in the mapped file.
const std::byte* file_bytes(const models::GgufFile& file, const WeightRef& w, int e) {
    return file.data(*w.info) + w.mat(e).offset;
}

}  // namespace

uint64_t DeviceExperts::expert_bytes(const LayerWeights& l) {
    uint64_t b = 0;
    for (auto m : kParts) b += storage::align_up((l.*m).mat_bytes(), kAlign);
    for (auto m : kBiases)
        if (l.*m) b += storage::align_up(uint64_t((l.*m).n_cols) * 4, kAlign);
    return b;
}

uint64_t DeviceExperts::scratch_bytes(const models::Hparams& hp) {
    return device_expert_scratch_bytes(kRows, hp.moe.n_expert_used, hp.n_embd, hp.moe.n_ff_exp);
}

namespace {
uint64_t staging_slot_bytes(const models::Hparams& hp) { return 2ull * uint64_t(DeviceExperts::scratch_rows(hp)) * hp.n_embd * 4; }
}  // namespace

uint64_t DeviceExperts::staging_bytes(const models::Hparams& hp) { return ring_bytes(staging_slot_bytes(hp), 1); }

DeviceExperts::DeviceExperts(gpu::Device& dev, gpu::Stream& compute, gpu::Stream& h2d, gpu::Stream& d2h,
                             const models::Hparams& hp, const models::GgufFile& file,
                             const std::vector<LayerWeights>& layers, const std::vector<std::vector<int32_t>>& held,
                             storage::MemoryBudget& dram)
    : dev_(dev), compute_(compute), h2d_(h2d), d2h_(d2h), n_embd_(hp.n_embd), n_ff_(hp.moe.n_ff_exp), act_(hp.ffn_act),
      alpha_(hp.swiglu_alpha), limit_(hp.swiglu_limit), rows_(scratch_rows(hp)) {
    index_.assign(layers.size(), std::vector<int32_t>(static_cast<size_t>(hp.moe.n_expert), -1));
    weights_.resize(layers.size());
    for (size_t il = 0; il < layers.size() && il < held.size(); ++il) {
        if (held[il].empty()) continue;
        const LayerWeights& l = layers[il];
        for (auto m : kParts)
            if (!dev.supports_weight((l.*m).type))
                throw BackendError(fmt::format("layer {}'s experts are {}, which {}'s kernels do not read", il,
                                               dtype_name((l.*m).type), dev.name()),
                                   "keep them on the host: --override-tensor exps=dram");
        const uint64_t each = expert_bytes(l);
        weights_[il] = dev.memory().allocate(each * held[il].size(), fmt::format("layer {}'s experts", il));
        auto* at = weights_[il].as<std::byte>();
        for (int32_t e : held[il]) {
            Expert x;
            DevWeight* parts[] = {&x.gate, &x.up, &x.down};
            for (size_t p = 0; p < std::size(kParts); ++p) {
                const WeightRef& w = l.*kParts[p];
                dev.copy_h2d(at, file_bytes(file, w, e), w.mat_bytes(), h2d);
                *parts[p] = {w.type, at, w.n_rows, w.n_cols};
                at += storage::align_up(w.mat_bytes(), kAlign);
                if (const WeightRef& b = l.*kBiases[p]; b) {
                    dev.copy_h2d(at, b.f32() + e * b.n_cols, size_t(b.n_cols) * 4, h2d);
                    x.bias[p] = reinterpret_cast<const float*>(at);
                    at += storage::align_up(uint64_t(b.n_cols) * 4, kAlign);
                }
            }
            index_[il][static_cast<size_t>(e)] = static_cast<int32_t>(experts_.size());
            experts_.push_back(x);
            ++n_held_;
        }
        h2d.synchronize();
    }
    auto floats = [&](int64_t n) { return dev.memory().allocate(uint64_t(n) * 4, "the device experts' activations"); };
    x_ = floats(rows_ * n_embd_);
    y_ = floats(rows_ * n_embd_);
    gate_ = floats(rows_ * n_ff_);
    up_ = floats(rows_ * n_ff_);
    staging_ = std::make_unique<storage::PinnedBuffer>(dram, staging_slot_bytes(hp), "device experts' staging");
    uploaded_ = dev.make_event();
    computed_ = dev.make_event();
    downloaded_ = dev.make_event();
    if (n_held_ > 0) STRATA_LOG_INFO("{}: {} routed experts held on the device", dev.name(), n_held_);
}

DeviceExperts::~DeviceExperts() {
    try {
        d2h_.synchronize();  // the staging and scratch outlive the copies queued on them
    } catch (const std::exception& e) {
        STRATA_LOG_WARN("{}: the device experts' last work failed: {}", dev_.name(), e.what());
    }
}

int DeviceExperts::give_back_last_layer() {
    for (int il = static_cast<int>(weights_.size()) - 1; il >= 0; --il) {
        if (!weights_[il].data()) continue;
        weights_[il].reset();
        for (int32_t& at : index_[il])  // its entries in experts_ stay, unreferenced
            if (at >= 0) at = -1, --n_held_;
        return il;
    }
    return -1;
}

std::vector<std::vector<int32_t>> DeviceExperts::held() const {
    std::vector<std::vector<int32_t>> out(index_.size());
    for (size_t il = 0; il < index_.size(); ++il)
        for (size_t e = 0; e < index_[il].size(); ++e)
            if (index_[il][e] >= 0) out[il].push_back(static_cast<int32_t>(e));
    return out;
}

void DeviceExperts::borrow_layer(int il, const LayerWeights& l, const std::byte* base,
                                 const std::function<uint64_t(const WeightRef&)>& offset_in_layer, gpu::Event& copied) {
    borrowed_.resize(index_.at(static_cast<size_t>(il)).size());
    for (size_t e = 0; e < borrowed_.size(); ++e) {
        Expert& x = borrowed_[e];
        DevWeight* parts[] = {&x.gate, &x.up, &x.down};
        for (size_t p = 0; p < std::size(kParts); ++p) {
            const WeightRef& w = l.*kParts[p];
            *parts[p] = {w.type, base + offset_in_layer(w.mat(int64_t(e))), w.n_rows, w.n_cols};
            const WeightRef& b = l.*kBiases[p];  // one row per expert
            x.bias[p] = b ? reinterpret_cast<const float*>(base + offset_in_layer(b)) + e * size_t(b.n_cols) : nullptr;
        }
    }
    borrowed_layer_ = il;
    borrowed_ready_ = &copied;
}

bool DeviceExperts::holds(int il, int e) const {
    if (il == borrowed_layer_) return true;
    return static_cast<size_t>(il) < index_.size() && index_[il][static_cast<size_t>(e)] >= 0;
}

void DeviceExperts::start(int il, int e, const float* x, int64_t n, int64_t n_long, float* y) {
    STRATA_ASSERT(holds(il, e) && n <= kRows);
    if (used_ + n > rows_) collect();  // the scratch is full: wait for what it holds
    // An expert held is computed from its own copy in a borrowed layer too (the same bytes), and
    // counted as held, so that the held experts' share is the same with op offload or without.
    const int32_t at = static_cast<size_t>(il) < index_.size() ? index_[il][static_cast<size_t>(e)] : -1;
    const bool borrowed = at < 0;
    if (borrowed && borrowed_ready_) {  // the layer's copy, which the device's attention did not wait for
        borrowed_ready_->wait_on(compute_);
        borrowed_ready_ = nullptr;
    }
    (borrowed ? offloaded_choices_ : choices_) += uint64_t(n);
    const Expert& w = borrowed ? borrowed_[static_cast<size_t>(e)] : experts_[static_cast<size_t>(at)];
    const int64_t E = n_embd_, F = n_ff_;
    const size_t bytes = size_t(n * E) * 4;
    auto* up_staging = reinterpret_cast<float*>(staging_->data()) + used_ * E;
    auto* down_staging = reinterpret_cast<float*>(staging_->data()) + (rows_ + used_) * E;
    float* dx = x_.as<float>() + used_ * E;
    float* dy = y_.as<float>() + used_ * E;
    float* dg = gate_.as<float>() + used_ * F;
    float* du = up_.as<float>() + used_ * F;
    std::memcpy(up_staging, x, bytes);
    dev_.copy_h2d(dx, up_staging, bytes, h2d_);
    uploaded_->record(h2d_);
    uploaded_->wait_on(compute_);
    const MatmulOutput gate_up[] = {{w.gate, dg}, {w.up, du}};
    project(dev_, compute_, MatmulInput{dx}, gate_up, n, n_long);
    if (w.bias[0]) dev_.add_rows(dg, w.bias[0], n, F, compute_);
    if (w.bias[1]) dev_.add_rows(du, w.bias[1], n, F, compute_);
    if (act_ == models::FfnAct::SiluClamped) dev_.swiglu_clamped(dg, du, n, F, alpha_, limit_, compute_);
    else dev_.swiglu(dg, du, n, F, compute_);
    project(dev_, compute_, w.down, dg, dy, n, n_long);
    if (w.bias[2]) dev_.add_rows(dy, w.bias[2], n, E, compute_);
    computed_->record(compute_);
    computed_->wait_on(d2h_);
    dev_.copy_d2h(down_staging, dy, bytes, d2h_);
    pending_.push_back({y, used_, n});
    used_ += n;
}

void DeviceExperts::run_meanwhile() {
    if (!meanwhile_ || std::uncaught_exceptions() > 0) return;
    const std::function<void()> work = std::move(meanwhile_);
    meanwhile_ = nullptr;
    work();
}

void DeviceExperts::collect() {
    if (pending_.empty()) return;
    run_meanwhile();
    const std::vector<Pending> landing = std::move(pending_);
    pending_.clear();
    used_ = 0;
    downloaded_->record(d2h_);
    downloaded_->synchronize();
    const auto* down_staging = reinterpret_cast<const float*>(staging_->data()) + rows_ * n_embd_;
    for (const Pending& p : landing) std::memcpy(p.y, down_staging + p.at * n_embd_, size_t(p.n * n_embd_) * 4);
}

}  // namespace strata::runtime

#pragma once
// Routed experts held in device memory (the plan's most chosen ones, or every expert of the
// layers `--override-tensor ...exps=device` names) and computed there on the rows the router
// sends them, beside the host's CPU computing the others (runtime/exec/remote_experts.h). Each
// expert's three matrices are copied once at load from the model file as laid out there; a
// pass's rows go up and its outputs come back through page-locked staging, every expert of a
// layer queued before the host starts its own, and one wait per layer (more where a pass's
// choices outgrow the scratch).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/kernel_shapes.h"
#include "gpu/device.h"
#include "models/hparams.h"
#include "runtime/exec/backend.h"
#include "runtime/exec/device/device_weight.h"
#include "runtime/exec/remote_experts.h"
#include "runtime/weights/model_weights.h"
#include "storage/pinned_pool.h"

namespace strata::models { class GgufFile; }
namespace strata::storage { class MemoryBudget; }

namespace strata::runtime {

class DeviceExperts final : public RemoteExperts {
public:
    // The most rows one expert of a layer is given: a pass's tokens.
    static constexpr int64_t kRows = Backend::kMaxUbatch;
    // Rows the scratch takes before the host waits for them: every routed choice of a pass
    // (device_expert_rows, core/kernel_shapes.h).
    static int64_t scratch_rows(const models::Hparams& hp) { return device_expert_rows(kRows, hp.moe.n_expert_used); }

    // Copies `held[il]`'s experts of each layer from `file` (`layers`: the file's views) to the
    // device. Throws OutOfBudget when the device's memory cannot hold them, BackendError when
    // its kernels do not read their type.
    DeviceExperts(gpu::Device& dev, gpu::Stream& compute, gpu::Stream& h2d, gpu::Stream& d2h, const models::Hparams& hp,
                  const models::GgufFile& file, const std::vector<LayerWeights>& layers,
                  const std::vector<std::vector<int32_t>>& held, storage::MemoryBudget& dram);
    ~DeviceExperts() override;

    // Device bytes of one expert of `l` (its three matrices, each aligned), and of the scratch.
    static uint64_t expert_bytes(const LayerWeights& l);
    static uint64_t scratch_bytes(const models::Hparams& hp);
    // DRAM the page-locked staging takes (its mapping rounded up as the pool rounds it).
    static uint64_t staging_bytes(const models::Hparams& hp);
    int n_held() const { return n_held_; }
    uint64_t choices() const { return choices_; }  // routed choices (a token's, to one expert) its held experts computed so far
    uint64_t offloaded_choices() const { return offloaded_choices_; }  // and those of borrowed layers (op offload)
    // Both back to earlier counts (a pass that is run again counts once).
    void reset_choices(uint64_t choices, uint64_t offloaded) { choices_ = choices, offloaded_choices_ = offloaded; }
    // Frees the device memory of the last layer still holding experts, whose experts the host
    // computes from then on (it holds every expert itself); returns that layer, or -1 when none
    // holds any. Nothing queued may still read them.
    int give_back_last_layer();
    // The experts held now, per layer.
    std::vector<std::vector<int32_t>> held() const;
    // Op offload of a long pass: every routed expert of layer `il` it does not hold computed
    // here, from the layer's copy at `base` on the device as the file lays it out (each tensor
    // `w` at offset_in_layer(w)), until lend_back(); the first waits for `copied` (the copy's
    // event), so that the layer's attention need not. Its kernels must read the experts' types.
    void borrow_layer(int il, const LayerWeights& l, const std::byte* base,
                      const std::function<uint64_t(const WeightRef&)>& offset_in_layer, gpu::Event& copied);
    void lend_back() { borrowed_layer_ = -1, borrowed_ready_ = nullptr; }
    // Host work to do while the device computes a layer's experts (op offload's rebuild of the
    // next layer to copy in): run once, at the first wait for them (a full scratch, or
    // collect()); never where the layer makes none, nor while a failed pass unwinds. The caller
    // clears it (meanwhile(nullptr)) once the layer is done.
    void meanwhile(std::function<void()> work) { meanwhile_ = std::move(work); }

    bool holds(int il, int e) const override;
    void start(int il, int e, const float* x, int64_t n, int64_t n_long, float* y) override;
    void collect() override;

private:
    void run_meanwhile();  // meanwhile's work, once
    struct Expert {
        DevWeight gate, up, down;
        const float* bias[3] = {};  // gate's, up's and down's (gpt-oss), or null
    };
    struct Pending {
        float* y;
        int64_t at, n;
    };
    gpu::Device& dev_;
    gpu::Stream &compute_, &h2d_, &d2h_;
    int64_t n_embd_, n_ff_;
    models::FfnAct act_;  // the experts' activation (SwiGLU, or gpt-oss's clamped one with these)
    float alpha_, limit_;
    std::vector<std::vector<int32_t>> index_;  // [layer][expert]: into experts_, or -1
    std::vector<Expert> experts_;
    int borrowed_layer_ = -1;        // -1: none
    std::vector<Expert> borrowed_;   // its experts, by index
    gpu::Event* borrowed_ready_ = nullptr;  // its copy's event, until the first of them waits for it
    std::function<void()> meanwhile_;
    std::vector<gpu::DeviceBuffer> weights_;   // one per layer holding experts
    int64_t rows_;                             // scratch_rows()
    gpu::DeviceBuffer x_, gate_, up_, y_;      // rows_ rows each
    std::unique_ptr<storage::PinnedBuffer> staging_;  // rows_ rows going up, then rows_ coming down
    std::unique_ptr<gpu::Event> uploaded_, computed_, downloaded_;
    std::vector<Pending> pending_;
    int64_t used_ = 0;                         // rows of the scratch taken since the last collect()
    int n_held_ = 0;
    uint64_t choices_ = 0, offloaded_choices_ = 0;
};

}  // namespace strata::runtime

#pragma once
// Where each layer's weights are when the forward pass needs them. Resident weights (the
// output head, embeddings, norms and resident layers) are read once at load, with O_DIRECT,
// into anonymous memory: a mapping of the file would turn a model file truncated or
// rewritten while in use into SIGBUS at the next access. Streamed layers are read with
// O_DIRECT into a ring of pinned buffers, `prefetch_depth` layers ahead of compute,
// cyclically across passes so the next token's first layers load while this token's last
// layers compute; a failed read, or a model file changed on disk, fails that pass with an
// IoError and the ring starts afresh on the next one. A mixture of experts whose experts
// are offloaded (residency.experts_cached) keeps the rest of those layers resident and reads
// the routed experts a pass chooses through the expert cache (runtime/weights/expert_cache.h).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "models/hparams.h"
#include "runtime/weights/model_weights.h"
#include "runtime/weights/residency.h"

namespace strata::models { class GgufFile; }

namespace strata::storage {
class MemoryBudget;
class PinnedPool;
class Reader;
}  // namespace strata::storage

namespace strata { class Trace; }

namespace strata::runtime {

class StreamRing;
class ExpertCache;

struct StreamStats {
    uint64_t bytes_read = 0;    // layer (and offloaded expert) bytes read from the file
    uint64_t layers_read = 0;
    double wait_seconds = 0;    // compute blocked on a read
};

class WeightStore {
public:
    // What a placement needs to know to choose residency: the layers' sizes as this store
    // reads them, the fixed weights, `budget`'s limit, and `other_bytes` of KV cache and
    // activations also charged to it.
    static ResidencyInput residency_input(const models::GgufFile& file, const models::Hparams& hp,
                                          const storage::MemoryBudget& budget, uint64_t other_bytes, int prefetch_depth);
    // Holds the weights as `residency` (runtime/place/placement: from a plan, for
    // residency_input's numbers) says, and reserves what it keeps in `budget`. Throws IoError
    // when the resident weights cannot be read and OutOfBudget when they are larger than this
    // machine's RAM.
    WeightStore(const models::GgufFile& file, const models::Hparams& hp, storage::MemoryBudget& budget, Residency residency);
    ~WeightStore();
    WeightStore(const WeightStore&) = delete;
    WeightStore& operator=(const WeightStore&) = delete;

    const ModelWeights& weights() const { return weights_; }  // output head, embeddings, norms
    const models::GgufFile& file() const { return file_; }
    const Residency& residency() const { return residency_; }

    // Layer `il`'s weights, ready; blocks while a streamed layer is still being read. Layers
    // are acquired in order (0, 1, ..., n-1, 0, 1, ...), each released before the next.
    // Throws IoError (nothing held) when a streamed layer cannot be read or the model file
    // changed since load.
    const LayerWeights& acquire(int il);
    void release(int il);
    // The acquired layer `il` as one range of host memory holding every tensor of it, as laid
    // out in the file (the GPU copies it in one piece). Valid until release(il).
    struct HostRange {
        const std::byte* data = nullptr;
        uint64_t length = 0;
    };
    HostRange layer_range(int il) const;
    // Reads layer `il` (one the residency puts on the device) into `dst`: layer_range's
    // length bytes, aligned for O_DIRECT (storage::kDefaultDioAlign); its tensors sit at
    // offset_in_layer. Throws IoError.
    void read_layer(int il, std::byte* dst);
    // Layer `il`'s matmuls move to the CPU (device memory was taken away): a layer the
    // residency put on the device is read from the file into DRAM, charged to the budget, and
    // stays there untiled; from then on residency().cpu(il). Throws OutOfBudget when DRAM cannot
    // hold it, IoError when it cannot be read.
    void run_on_cpu(int il);
    // Where tensor `w` of layer il starts inside the layer's range.
    uint64_t offset_in_layer(int il, const WeightRef& w) const;

    // Resident `layers` as laid out in the file, in this order each cycle, for a device that
    // copies in layers the CPU keeps in its tiles (op offload), in pinned buffers reserved in
    // `budget`: a layer held whole in DRAM is rebuilt from it (file_layout.h) when acquired, into
    // the next of `n_slots` buffers in turn (one where the budget has no room for more); the rest (a layer whose experts are cached, or whose
    // tiles keep only what the CPU's kernels read) are read afresh from the file into `n_slots`
    // buffers ahead of use. Once, before the first acquire_as_read. Returns the pinned bytes held.
    uint64_t stage_as_read(std::vector<int> layers, int n_slots, storage::MemoryBudget& budget);
    // Whether acquire_as_read rebuilds layer `il` from DRAM; if so, which buffer the next
    // rebuild writes: the caller makes sure a copy out of it (n_slots rebuilds ago) is done.
    bool rebuilds(int il) const { return il < int(rebuilt_.size()) && rebuilt_[il]; }
    int next_rebuild_buffer() const { return rebuild_next_; }
    // The next staged layer, `il`, as laid out in the file; rebuilt on the calling thread (and
    // its cpu::ThreadPool), or waited for while it is read. While a layer is rebuilt, written(r)
    // says its first r.length bytes are ready (each tensor below that), so that their copy can
    // overlap the rest's rebuild. Throws IoError (nothing held) when it cannot be read or the
    // file changed since load. Valid until release_as_read; a rebuilt layer's buffer until it
    // is taken again, n_slots rebuilds on.
    HostRange acquire_as_read(int il, const std::function<void(HostRange)>& written = {});
    void release_as_read();
    // Op offload stopped: the staged reads end and the pinned buffers go back to the budget.
    void drop_as_read();
    // The pinned bytes op offload's staging holds (0: none).
    uint64_t as_read_bytes() const;

    // Rewrites the resident layers' matrices and the output head (with the embeddings, when
    // they are the same tensor) in place into the CPU kernels' tiled layout (cpu::tile_weights)
    // where the active path has one; streamed layers stay as read. Only what the CPU computes:
    // a device copies layers and the head as laid out in the file, so with one, `only_layers`
    // names the layers the CPU runs and the head stays as read. Returns the bytes rewritten.
    uint64_t tile_for_cpu(const std::vector<bool>* only_layers = nullptr);

    // The cache the routed experts of offloaded layers are read through, or null (residency.experts).
    ExpertCache* expert_cache() const { return experts_.get(); }

    StreamStats stats() const;
    // Records each layer read and each wait for one (StreamRing) and each layer's compute
    // from acquire to release ("compute: layers") into `trace` (may be null).
    void set_trace(Trace* trace);

private:
    struct LayerRange {
        uint64_t offset = 0;  // aligned file offset of the layer's first byte
        uint64_t length = 0;  // aligned length covering every tensor of the layer
    };

    // Fills anonymous memory with the resident weights and points weights_ at it.
    void load_resident();
    std::unique_ptr<StreamRing> make_stream(storage::PinnedPool& pool, std::vector<int> items, const char* what);
    // Layer il from `ring` (over `items` in `pool`), counted in stats_; a failed read replaces
    // the ring and throws.
    const std::byte* read_through(std::unique_ptr<StreamRing>& ring, storage::PinnedPool& pool,
                                  const std::vector<int>& items, const char* what, int il);
    // Throws IoError when the model file's size or modification time differ from load's.
    void check_file_unchanged() const;

    const models::GgufFile& file_;
    ModelWeights weights_;
    Residency residency_;
    std::vector<LayerRange> ranges_;
    std::vector<int> streamed_;  // layer ids streamed, in order
    struct AnonymousMemory;
    std::unique_ptr<AnonymousMemory> resident_memory_;  // before reader_: outlives its reads
    std::vector<std::unique_ptr<AnonymousMemory>> moved_memory_;  // layers moved off the device (run_on_cpu)
    storage::MemoryBudget& budget_;
    std::unique_ptr<storage::Reader> reader_;
    std::unique_ptr<storage::PinnedPool> ring_;
    std::unique_ptr<StreamRing> stream_;
    std::vector<int> staged_;  // resident layers read again as laid out in the file, in order
    std::unique_ptr<storage::PinnedPool> staging_;
    std::unique_ptr<StreamRing> as_read_;
    std::vector<bool> rebuilt_;  // per layer: staged by rebuilding it from DRAM
    std::unique_ptr<storage::PinnedPool> rebuild_buffers_;  // taken in turn
    int rebuild_next_ = 0;
    bool acquired_rebuilt_ = false;
    int rebuild_track_ = 0;
    std::unique_ptr<ExpertCache> experts_;
    LayerWeights view_;  // the acquired streamed layer, rebased into its slot
    const std::byte* view_base_ = nullptr;  // its slot
    std::vector<const std::byte*> resident_base_;  // per resident layer: its file range in memory
    StreamStats stats_;
    struct FileIdentity;
    std::unique_ptr<FileIdentity> identity_;
    Trace* trace_ = nullptr;
    int compute_track_ = 0;
    std::chrono::steady_clock::time_point acquired_at_;
    struct Reserved;
    std::unique_ptr<Reserved> reserved_;
};

}  // namespace strata::runtime

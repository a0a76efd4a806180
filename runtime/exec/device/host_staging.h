#pragma once
// Page-locked host memory for what a pass copies between host and device, one part each,
// carved from one pinned slot (cudaHostRegister'ed by the pool's pinner on CUDA) and charged to DRAM.
#include <cstdint>
#include <memory>

#include "storage/pinned_pool.h"

namespace strata::storage { class MemoryBudget; }

namespace strata::runtime {

class HostStaging {
public:
    // Bytes of each part; a part of 0 bytes still gets a distinct address.
    struct Sizes {
        uint64_t embd = 0, ints = 0, tables = 0, masks = 0, q = 0, k = 0, v = 0, attn = 0, logits = 0, rebuild = 0;
    };
    HostStaging(storage::MemoryBudget& dram, const Sizes& bytes);
    // The bytes of the one pinned slot the parts are carved from.
    static uint64_t slot_bytes(const Sizes& bytes);

    float* embd = nullptr;       // the pass's embeddings, looked up on the host
    int32_t* ints = nullptr;     // positions, KV blocks, KV rows, key counts, tree bases: one per token each
    int32_t* tables = nullptr;   // one block table row per token
    uint64_t* masks = nullptr;   // draft trees' masks: one row per token
    float* q = nullptr;          // q, k, v going down for CPU attention
    float* k = nullptr;
    float* v = nullptr;
    float* attn = nullptr;       // CPU attention's output going up
    float* logits = nullptr;     // the head's logits going down
    int32_t* rebuild = nullptr;  // blocks, rows and positions of the KV to recompute

private:
    storage::PinnedBuffer buffer_;
};

}  // namespace strata::runtime

#include "runtime/exec/kv_rebuild.h"

#include <algorithm>

#include "cpu/kv_format.h"
#include "cpu/matmul.h"
#include "cpu/quant.h"
#include "cpu/thread_pool.h"
#include "runtime/exec/qk_prep.h"

namespace strata::runtime {

namespace {
constexpr size_t kChunk = Backend::kMaxUbatch;  // rows per matmul: bounds the scratch
}  // namespace

void rows_to_rebuild(const KvCache& kv, std::span<const PassLayout::Segment> segments, std::vector<RebuildRow>& out) {
    out.clear();
    std::vector<bool> seen(kv.pool().n_blocks(), false);
    for (const auto& s : segments) {
        const auto table = kv.block_table(s.seq);
        for (int64_t b = 0; b * KvCache::kBlockSize < s.pos0; ++b) {
            if (seen[table[b]]) continue;
            seen[table[b]] = true;
            const int64_t end = std::min<int64_t>(s.pos0, (b + 1) * KvCache::kBlockSize);
            for (int64_t pos = b * KvCache::kBlockSize; pos < end; ++pos)
                out.push_back({table[b], static_cast<int32_t>(pos % KvCache::kBlockSize), pos});
        }
    }
}

void KvRebuilder::rebuild(std::span<const RebuildRow> rows, const LayerWeights& l, const cpu::RopeParams& rope,
                          KvCache& kv, int il, bool int8_acts) {
    for (size_t r0 = 0; r0 < rows.size(); r0 += kChunk)
        run(rows.subspan(r0, std::min(kChunk, rows.size() - r0)), l, rope, kv, il, int8_acts);
}

void KvRebuilder::run(std::span<const RebuildRow> rows, const LayerWeights& l, const cpu::RopeParams& rope, KvCache& kv,
                      int il, bool int8_acts) {
    const int64_t n = static_cast<int64_t>(rows.size()), E = hp_.n_embd, KV = hp_.n_embd_kv();
    x_.resize(kChunk * E);
    k_.resize(kChunk * KV);
    v_.resize(kChunk * KV);
    cpu::parallel_for(n, [&](int64_t i) {
        const RebuildRow& r = rows[i];
        cpu::load_kv_values(kv.type(), kv.hidden(il, r.block) + r.row * kv.hidden_row_bytes(), 0, &x_[i * E], E);
    });
    const cpu::MatmulOut kv_out[] = {matmul_out(l.wk, k_.data()), matmul_out(l.wv, v_.data())};
    cpu::matmul_many(kv_out, E, x_.data(), n, int8_acts);
    cpu::parallel_for(n, [&](int64_t i) {
        const RebuildRow& r = rows[i];
        prepare_keys(hp_, l, rope, &k_[i * KV], r.pos);
        if (l.bv) cpu::add(&v_[i * KV], l.bv.f32(), KV);
        kv.store(il, r.block, r.row, &k_[i * KV], &v_[i * KV]);
    });
}

}  // namespace strata::runtime

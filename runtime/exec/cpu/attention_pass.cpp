#include "runtime/exec/cpu/attention_pass.h"

#include <vector>

#include "cpu/attention_cpu.h"

namespace strata::runtime {

void attend_on_cpu(const AttentionSpec& spec, KvCache& kv, int il, std::span<const PassLayout::Segment> segments,
                   const float* q, float* out, const float* sinks, std::span<const DraftRows> drafts) {
    using Segment = PassLayout::Segment;
    const int64_t Q = int64_t(spec.n_head) * spec.head_dim, O = int64_t(spec.n_head) * spec.v_dim();
    // Every segment's tiles (and a decode row's parts of its keys) in one parallel loop.
    std::vector<cpu::AttentionTree> trees(segments.size());
    std::vector<cpu::AttentionArgs> batch(segments.size());
    for (size_t i = 0; i < segments.size(); ++i) {
        const Segment& s = segments[i];
        cpu::AttentionArgs& a = batch[i];
        if (s.draft >= 0) {
            const DraftRows& d = drafts[size_t(s.draft)];
            trees[i] = {d.base, d.slot.data(), d.pos.data(), d.key_pos.data(), d.mask.data(), d.words};
            a.tree = &trees[i];
        }
        a.q = q + s.first * Q;
        a.k = kv.k(il, 0);
        a.v = spec.values_in_keys ? a.k : kv.v(il, 0);
        a.out = out + s.first * O;
        a.n_tokens = s.n;
        a.pos0 = s.pos0;
        a.n_head = spec.n_head;
        a.n_head_kv = spec.n_head_kv;
        a.head_dim = spec.head_dim;
        a.kv_stride = kv.row_bytes();
        a.kv_type = kv.type();
        a.block_table = kv.block_table(s.seq).data();
        a.block_size = KvCache::kBlockSize;
        a.block_stride = kv.block_stride(il);
        a.window = spec.window;
        a.scale = spec.scale;
        a.softcap = spec.softcap;
        a.sinks = sinks;
        a.v_head_dim = spec.v_head_dim;
        a.rows = s.rows;
    }
    cpu::attention_batch(batch);
}

}  // namespace strata::runtime

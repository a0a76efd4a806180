#include "runtime/exec/cpu/ffn_dense.h"

#include "cpu/norm_rope_act.h"
#include "cpu/thread_pool.h"

namespace strata::runtime {

void gated_ffn(const PassMatmul& mm, const models::Hparams& hp, const GatedFfn& w, const float* x, int64_t n,
               int64_t n_long, float* gate_buf, float* up_buf, float* out) {
    const int64_t F = w.gate.n_rows, E = w.down.n_rows;
    const cpu::MatmulOut gate_up[] = {matmul_out(w.gate, gate_buf), matmul_out(w.up, up_buf)};
    mm.run(gate_up, w.gate.n_cols, x, n, n_long);
    cpu::parallel_for(n, [&](int64_t t) {
        float* g = &gate_buf[t * F];
        float* u = &up_buf[t * F];
        if (w.gate_b) cpu::add(g, w.gate_b, F);
        if (w.up_b) cpu::add(u, w.up_b, F);
        switch (hp.ffn_act) {
            case models::FfnAct::GeluTanh: cpu::geglu(g, u, F); break;
            case models::FfnAct::SiluClamped: cpu::swiglu_clamped(g, u, F, hp.swiglu_alpha, hp.swiglu_limit); break;
            case models::FfnAct::Silu: cpu::swiglu(g, u, F); break;
        }
    });
    mm.project(w.down, gate_buf, n, out, n_long);
    if (w.down_b) cpu::parallel_for(n, [&](int64_t t) { cpu::add(&out[t * E], w.down_b, E); });
}

}  // namespace strata::runtime

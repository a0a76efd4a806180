#include "runtime/exec/cpu/ffn_dense.h"

#include "cpu/norm_rope_act.h"
#include "cpu/thread_pool.h"

namespace strata::runtime {

void gated_ffn(const PassMatmul& mm, models::FfnAct act, const GatedFfn& w, const float* x, int64_t n, int64_t n_long,
               float* gate_buf, float* up_buf, float* out) {
    const int64_t F = w.gate.n_rows;
    const cpu::MatmulOut gate_up[] = {matmul_out(w.gate, gate_buf), matmul_out(w.up, up_buf)};
    mm.run(gate_up, w.gate.n_cols, x, n, n_long);
    cpu::parallel_for(n, [&](int64_t t) {
        if (act == models::FfnAct::GeluTanh) cpu::geglu(&gate_buf[t * F], &up_buf[t * F], F);
        else cpu::swiglu(&gate_buf[t * F], &up_buf[t * F], F);
    });
    mm.project(w.down, gate_buf, n, out, n_long);
}

}  // namespace strata::runtime

#pragma once
// Greedy generation settings for tests that compare the tokens of two runs.
#include "runtime/engine.h"

namespace strata::test {

// Greedy decoding of up to `n_predict` tokens; with `ignore_eos`, always exactly that many.
inline runtime::GenerateParams greedy(int n_predict, bool ignore_eos = false) {
    runtime::GenerateParams gp;
    gp.n_predict = n_predict;
    gp.sampler.temperature = 0;
    gp.ignore_eos = ignore_eos;
    return gp;
}

}  // namespace strata::test

#pragma once
// A 4-layer model of 1 GB layers for the planner's hand-computed tests, with round numbers so
// costs can be worked out by hand.
#include "planner/model_shape.h"

namespace strata::test {

inline planner::ModelShape toy_shape() {
    planner::ModelShape s;
    s.name = "toy";
    s.family = "llama";
    s.n_layer = 4, s.n_embd = 1024, s.n_head = 8, s.n_head_kv = 8, s.head_dim = 128, s.n_ff = 4096, s.n_vocab = 1000;
    s.layers.assign(4, planner::LayerShape{1'000'000'000, 500'000'000, 500'000'000});
    s.output_bytes = 2'000'000, s.output_matmul_params = 1'000'000;
    s.tied_output = true;
    return s;
}

}  // namespace strata::test

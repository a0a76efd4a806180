#pragma once
// Small deepseek2 and gpt-oss files for the tests of models/ and planner/: their keys, and whole
// files holding every tensor of models/arch_tensors' lists.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "models/arch_tensors.h"
#include "tests/support/gguf_writer.h"

namespace strata::test {

// deepseek2 as DeepSeek-V3 is made, scaled down: 2 layers of n_embd 32, 4 heads of 16 + 8 values
// (8 rotated), a latent of 16, values of 8, low-rank queries of 24, a dense first layer of 64,
// then 4 experts of 16 (2 used) and one shared.
void deepseek2_keys(GgufWriter& w);
// gpt-oss scaled down: 2 layers of n_embd 32, 4 heads (2 for KV) of 8, window 16, 4 experts of 16 (2 used).
void gpt_oss_keys(GgufWriter& w);

// Changes to the tensor list (and each tensor's GGUF type id) before the file is written.
using TensorEdit = std::function<void(std::vector<models::TensorSpec>&, std::vector<uint32_t>&)>;
// A file with `keys` and every tensor of its architecture's lists, all zeros: matrices of type
// id `matrix_type` (0 F32, 1 F16), vectors F32; `edit` may change the list first.
std::filesystem::path write_arch_file(const std::function<void(GgufWriter&)>& keys, const std::string& name,
                                      uint32_t matrix_type = 0, const TensorEdit& edit = {});

}  // namespace strata::test

#pragma once
// The tensors a deepseek2 or gpt-oss file holds, with their shapes, from its hyperparameters:
// the list the forward pass binds, checked before any weight is read so that a file missing one
// (or holding it in another shape or type) gets an error naming it. (The other architectures'
// tensors are still bound by runtime/weights/model_weights.cpp.)
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "models/hparams.h"

namespace strata::models {

class GgufFile;

struct TensorSpec {
    std::string name;
    std::array<int64_t, 3> ne{1, 1, 1};  // GGUF order: ne[0] values per row, ne[2] experts
    bool required = true;
    bool matrix = true;  // a weight matrix in any type with CPU kernels; else F32 (norms, biases, sinks)
};

// Whether `arch` has its tensor list here.
bool has_tensor_list(Arch arch);
// token_embd, output_norm and output (absent: tied to token_embd where the architecture allows).
std::vector<TensorSpec> global_tensors(const Hparams& hp);
// Every tensor of layer il.
std::vector<TensorSpec> layer_tensors(const Hparams& hp, int il);
// Checks every tensor of the lists against the file: present when required, of the listed
// shape, and of a type Strata computes with. Throws FormatError naming the first that is not.
void check_tensors(const GgufFile& f, const Hparams& hp);

}  // namespace strata::models

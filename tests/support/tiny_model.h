#pragma once
// Tiny random-weight models of each architecture, byte-for-byte the ones that
// tests/reference/make_arch_fixtures.py wrote when it recorded the reference logits.
#include <filesystem>

#include <nlohmann/json.hpp>

namespace strata::test {

// A config in that shape: F32, 96 tokens, 4 heads (2 for KV), full rotary dims.
nlohmann::json tiny_config(const std::string& arch, int n_embd, int n_layer, int n_ff);

// Writes the model described by one `config` object of tiny_arch_logits.json (F32 weights, or
// Q8_0 matrices with "weight_type": "Q8_0") or tiny_quant_logits.json (its `weight_type` for every
// matrix: Q2_K, Q3_K, IQ4_NL or IQ4_XS):
// the architecture's tensors (fused, with experts, QK- and post-norms as the config says).
void write_tiny_model(const nlohmann::json& config, uint64_t seed, float rms_eps, const std::filesystem::path& path);

}  // namespace strata::test

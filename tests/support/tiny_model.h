#pragma once
// Tiny random-weight models of each architecture, byte-for-byte the ones that
// tests/reference/make_arch_fixtures.py wrote when it recorded the reference logits.
#include <filesystem>

#include <nlohmann/json.hpp>

namespace strata::test {

// A config in that shape: F32, 96 tokens, 4 heads (2 for KV), full rotary dims.
nlohmann::json tiny_config(const std::string& arch, int n_embd, int n_layer, int n_ff);

// `config` with Q8_0 matrices, its feed-forward widths rounded up to Q8_0's blocks of 32
// values (a row's matmul then has the same bits in any batch, on the CPU and the simulated device).
nlohmann::json with_q8_0(nlohmann::json config);
// `config` with stories260K's SentencePiece vocabulary (tests/fixtures/tokenizer_vocab_stories260k.json)
// and as many embedding rows, so that an Engine can run it.
nlohmann::json with_vocabulary(nlohmann::json config);

// Writes the model described by one `config` object of tiny_arch_logits.json (F32 weights, or
// Q8_0 matrices with "weight_type": "Q8_0", those named by "f32_matrices" (name endings) F32
// besides, in the architectures without a tensor list) or tiny_quant_logits.json (its `weight_type` for every
// matrix: Q2_K, Q3_K, IQ4_NL or IQ4_XS):
// the architecture's tensors (fused, with experts, QK- and post-norms as the config says).
void write_tiny_model(const nlohmann::json& config, uint64_t seed, float rms_eps, const std::filesystem::path& path);

}  // namespace strata::test

#include "tests/support/tiny_model.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cpu/kv_format.h"
#include "models/arch_tensors.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "tests/support/fixtures.h"
#include "tests/support/gguf_writer.h"

namespace strata::test {

namespace {

uint64_t fnv1a64(const std::string& s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
    return h;
}

// Draw i of the tensor `name`: splitmix64(key + (i + 1) * golden), as draws() in the Python script.
uint64_t draw(uint64_t key, size_t i) {
    uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// offset + scale * u, u uniform in [-1, 1) from splitmix64, as values() in the Python script.
std::vector<uint8_t> values(const std::string& name, uint64_t seed, size_t n, double scale, double offset) {
    const uint64_t key = fnv1a64(name) ^ seed;
    std::vector<uint8_t> bytes(n * 4);
    for (size_t i = 0; i < n; ++i) {
        const double u = static_cast<double>(draw(key, i) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        const float v = static_cast<float>(offset + scale * u);
        std::memcpy(&bytes[i * 4], &v, 4);
    }
    return bytes;
}

// Random valid blocks of `type` for n values, as quant_blocks() in the Python script: each byte
// the top byte of a draw, then each f16 scale field (8 + k) / 8 * 2^e, k and the sign from the
// field's first random byte, e per type (QUANT_SCALES there).
std::vector<uint8_t> quant_blocks(const std::string& name, uint64_t seed, DType type, size_t n) {
    struct Field { size_t offset; int exponent; };
    std::vector<Field> fields;
    switch (type) {
        case DType::Q2_K: fields = {{80, -7}, {82, -7}}; break;
        case DType::Q3_K: fields = {{108, -9}}; break;
        case DType::IQ4_NL: fields = {{0, -9}}; break;
        case DType::IQ4_XS: fields = {{0, -13}}; break;
        case DType::MXFP4: break;  // its e8m0 exponent byte, below
        default: throw std::invalid_argument("tiny models have no random blocks of " + std::string(dtype_name(type)));
    }
    const uint64_t key = fnv1a64(name) ^ seed;
    std::vector<uint8_t> bytes(row_bytes(type, static_cast<int64_t>(n)));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(draw(key, i) >> 56);
    const size_t block_bytes = traits(type).block_bytes;
    if (type == DType::MXFP4)  // a scale of 2^-7 or 2^-6 (ggml's half scale of e8m0)
        for (size_t b = 0; b < bytes.size(); b += block_bytes) bytes[b] = static_cast<uint8_t>(121 + (bytes[b] & 1));
    for (size_t b = 0; b < bytes.size(); b += block_bytes)
        for (const Field& f : fields) {
            const uint16_t r = bytes[b + f.offset];
            const uint16_t bits = static_cast<uint16_t>((r & 8) << 12 | (f.exponent + 15) << 10 | (r & 7) << 7);
            std::memcpy(&bytes[b + f.offset], &bits, 2);
        }
    return bytes;
}

// F32 values (rows of n_cols) rounded to Q8_0 as ggml's quantizer does.
std::vector<uint8_t> q8_0_rows(const std::vector<uint8_t>& f32, uint64_t n_cols) {
    const size_t n = f32.size() / 4, row_q8 = row_bytes(DType::Q8_0, static_cast<int64_t>(n_cols));
    std::vector<uint8_t> q(n / n_cols * row_q8);
    for (size_t r = 0; r < n / n_cols; ++r)
        cpu::store_kv_row(DType::Q8_0, reinterpret_cast<const float*>(&f32[r * n_cols * 4]), &q[r * row_q8],
                          static_cast<int64_t>(n_cols));
    return q;
}

// A SentencePiece vocabulary as tokenizer_vocab_*.json fixtures hold it: tokens, scores, types
// and the tokenizer's header keys.
void write_vocab(GgufWriter& w, const nlohmann::json& v) {
    w.kv_string("tokenizer.ggml.model", v["header"]["tokenizer.ggml.model"]);
    w.kv_string_array("tokenizer.ggml.tokens", v["tokens"].get<std::vector<std::string>>());
    auto array = [&](const std::string& key, uint32_t elem_type, const auto& values) {
        std::vector<uint8_t> payload(12 + 4 * values.size());
        const uint64_t n = values.size();
        std::memcpy(payload.data(), &elem_type, 4);
        std::memcpy(payload.data() + 4, &n, 8);
        std::memcpy(payload.data() + 12, values.data(), 4 * values.size());
        w.kv_raw(key, 9, payload);
    };
    array("tokenizer.ggml.scores", 6, v["scores"].get<std::vector<float>>());         // f32
    array("tokenizer.ggml.token_type", 5, v["token_type"].get<std::vector<int32_t>>());  // i32
    for (const char* id : {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                           "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id"})
        if (v["header"].contains(id)) w.kv_u32(id, v["header"][id]);
}

// The values of a deepseek2 or gpt-oss tensor by its name, as listed_scale() in the Python script.
std::pair<double, double> listed_scale(const std::string& name) {
    auto ends = [&](std::string_view e) { return name.size() >= e.size() && name.compare(name.size() - e.size(), e.size(), e) == 0; };
    if (ends("norm.weight")) return {0.1, 1.0};
    if (ends(".bias")) return {0.1, 0.0};
    for (const char* big : {"token_embd", "ffn_gate_inp", "attn_sinks"})
        if (name.find(big) != std::string::npos) return {0.5, 0.0};
    return {0.2, 0.0};
}

// Every tensor of models/arch_tensors' lists for the hyperparameters the keys in `w` give
// (the optional ones where the config asks): F32 values or Q8_0 matrices (its weight_type),
// experts of its expert_type.
void write_listed_tensors(GgufWriter& w, const nlohmann::json& c, uint64_t seed, const std::filesystem::path& path) {
    GgufWriter header = w;
    header.tensor("token_embd.weight", 0, {c["n_embd"].get<uint64_t>(), c["n_vocab"].get<uint64_t>()},
                  std::vector<uint8_t>(c["n_embd"].get<size_t>() * c["n_vocab"].get<size_t>() * 4));
    const std::filesystem::path header_path = path.string() + ".header";
    header.write(header_path);
    const models::Hparams hp = models::Hparams::from_gguf(models::GgufFile::open(header_path));
    std::filesystem::remove(header_path);
    std::vector<models::TensorSpec> specs = models::global_tensors(hp);
    for (int il = 0; il < hp.n_layer; ++il)
        for (auto& spec : models::layer_tensors(hp, il)) specs.push_back(spec);
    const std::string expert_type = c.value("expert_type", std::string());
    const bool q8_0 = c.value("weight_type", std::string()) == "Q8_0";
    for (const models::TensorSpec& spec : specs) {
        if (!spec.required && !c.value("optional_tensors", false) && spec.name != "output.weight") continue;
        const size_t n = size_t(spec.ne[0] * spec.ne[1] * spec.ne[2]);
        std::vector<uint64_t> ne{uint64_t(spec.ne[0])};
        if (spec.ne[1] > 1 || spec.ne[2] > 1) ne.push_back(uint64_t(spec.ne[1]));
        if (spec.ne[2] > 1) ne.push_back(uint64_t(spec.ne[2]));
        const bool quantized = !expert_type.empty() && spec.name.ends_with("_exps.weight");
        if (quantized) {
            const DType t = *dtype_from_name(expert_type);
            w.tensor(spec.name, static_cast<uint32_t>(t), ne, quant_blocks(spec.name, seed, t, n));
            continue;
        }
        const auto [scale, offset] = listed_scale(spec.name);
        std::vector<uint8_t> f32 = values(spec.name, seed, n, scale, offset);
        // Q8_0 where the config asks and the rows are whole blocks (MLA's attn_k_b of 16 values is not).
        if (q8_0 && spec.matrix && spec.ne[0] % 32 == 0)
            w.tensor(spec.name, static_cast<uint32_t>(DType::Q8_0), ne, q8_0_rows(f32, ne[0]));
        else
            w.tensor(spec.name, 0, ne, std::move(f32));
    }
}

}  // namespace

nlohmann::json with_q8_0(nlohmann::json config) {
    for (const char* width : {"n_ff", "n_ff_exp", "n_ff_shexp"})
        if (config.contains(width)) config[width] = (config[width].get<int>() + 31) / 32 * 32;
    config["weight_type"] = "Q8_0";
    return config;
}

nlohmann::json with_vocabulary(nlohmann::json config) {
    nlohmann::json vocab = nlohmann::json::parse(read_fixture_bytes("tokenizer_vocab_stories260k.json"));
    config["n_vocab"] = vocab["tokens"].size();
    config["vocab"] = std::move(vocab);
    return config;
}

nlohmann::json tiny_config(const std::string& arch, int n_embd, int n_layer, int n_ff) {
    return {{"name", arch}, {"arch", arch}, {"n_vocab", 96}, {"n_embd", n_embd}, {"n_layer", n_layer},
            {"n_head", 4},  {"n_head_kv", 2},        {"n_ff", n_ff},            {"n_rot", n_embd / 4},
            {"rope_base", 10000.0}, {"rope_freqs", false}, {"tied", true}, {"qkv_bias", arch == "qwen2"},
            {"linear_scale", 0.0}};
}

void write_tiny_model(const nlohmann::json& c, uint64_t seed, float rms_eps, const std::filesystem::path& path) {
    const std::string arch = c["arch"];
    const uint32_t E = c["n_embd"], F = c["n_ff"], V = c["n_vocab"], L = c["n_layer"];
    const uint32_t hd = c.value("head_dim", E / c["n_head"].get<uint32_t>());
    const uint32_t q = c["n_head"].get<uint32_t>() * hd, kv = c["n_head_kv"].get<uint32_t>() * hd;
    const uint32_t n_exp = c.value("n_expert", 0u);
    auto flag = [&](const char* k) { return c.value(k, false); };

    // The keys in make_arch_fixtures.py's order (the gguf package's writer).
    GgufWriter w;
    w.kv_string("general.architecture", arch);
    w.kv_u32(arch + ".context_length", c.value("n_ctx_train", 256u)).kv_u32(arch + ".embedding_length", E);
    w.kv_u32(arch + ".block_count", L);
    w.kv_u32(arch + ".feed_forward_length", F).kv_u32(arch + ".attention.head_count", c["n_head"]);
    w.kv_u32(arch + ".attention.head_count_kv", c["n_head_kv"]).kv_u32(arch + ".rope.dimension_count", c["n_rot"]);
    w.kv_f32(arch + ".rope.freq_base", c["rope_base"]).kv_f32(arch + ".attention.layer_norm_rms_epsilon", rms_eps);
    if (c["linear_scale"].get<double>() != 0)
        w.kv_string(arch + ".rope.scaling.type", "linear").kv_f32(arch + ".rope.scaling.factor", c["linear_scale"]);
    if (c.contains("head_dim"))
        w.kv_u32(arch + ".attention.key_length", hd).kv_u32(arch + ".attention.value_length", c.value("value_length", hd));
    if (n_exp) {
        w.kv_u32(arch + ".expert_count", n_exp).kv_u32(arch + ".expert_used_count", c["n_expert_used"]);
        if (c.contains("n_ff_exp")) w.kv_u32(arch + ".expert_feed_forward_length", c["n_ff_exp"]);
        if (c.contains("n_ff_shexp")) w.kv_u32(arch + ".expert_shared_feed_forward_length", c["n_ff_shexp"]);
        if (c.contains("gating")) w.kv_u32(arch + ".expert_gating_func", c["gating"]);
        if (c.contains("norm_weights")) w.kv_raw(arch + ".expert_weights_norm", 7, {uint8_t(c["norm_weights"].get<bool>())});
        if (c.contains("weights_scale")) w.kv_f32(arch + ".expert_weights_scale", c["weights_scale"]);
    }
    if (c.contains("swa")) w.kv_u32(arch + ".attention.sliding_window", c["swa"]);
    if (c.contains("swa_pattern")) w.kv_u32(arch + ".attention.sliding_window_pattern", c["swa_pattern"]);
    if (c.contains("rope_base_swa")) w.kv_f32(arch + ".rope.freq_base_swa", c["rope_base_swa"]);
    if (c.contains("attn_softcap")) w.kv_f32(arch + ".attn_logit_softcapping", c["attn_softcap"]);
    if (c.contains("final_softcap")) w.kv_f32(arch + ".final_logit_softcapping", c["final_softcap"]);
    if (c.contains("orig_ctx")) w.kv_u32(arch + ".rope.scaling.original_context_length", c["orig_ctx"]);
    if (c.contains("attn_factor")) w.kv_f32(arch + ".rope.scaling.attn_factor", c["attn_factor"]);
    // Keys beyond those above (deepseek2's and gpt-oss's), by their name after the architecture's.
    const auto extra = [&](const char* kind) { return c.value(kind, nlohmann::json::object()); };
    const nlohmann::json u32 = extra("extra_u32"), f32 = extra("extra_f32"), str = extra("extra_str");
    for (const auto& [k, v] : u32.items()) w.kv_u32(arch + "." + k, v);
    for (const auto& [k, v] : f32.items()) w.kv_f32(arch + "." + k, v);
    for (const auto& [k, v] : str.items()) w.kv_string(arch + "." + k, v);
    if (c.contains("vocab")) write_vocab(w, c["vocab"]);
    if (const auto t = models::find_arch(arch); t && models::has_tensor_list(t->arch)) {
        write_listed_tensors(w, c, seed, path);
        return w.write(path);
    }

    // GGUF dims are innermost first: a (rows, cols) matrix is ne = {cols, rows}. Matrices take
    // the config's weight_type (F32 when absent): Q8_0 rounds the F32 values as ggml's quantizer
    // does, the low-bit types are random valid blocks; vectors stay F32, and so do the matrices
    // whose names end as one of "f32_matrices" says (a type of their own, as a Q4_K_M file's Q6_K attn_v).
    const DType weight_type = *dtype_from_name(c.value("weight_type", std::string("F32")));
    auto add = [&](const std::string& name, std::vector<uint64_t> ne, double scale, double offset) {
        size_t n = 1;
        for (auto d : ne) n *= d;
        const auto f32 = c.value("f32_matrices", std::vector<std::string>{});
        const bool own = std::any_of(f32.begin(), f32.end(), [&](const std::string& end) { return name.ends_with(end); });
        const DType wtype = own ? DType::F32 : weight_type;
        if (ne.size() < 2 || wtype == DType::F32) return void(w.tensor(name, 0, ne, values(name, seed, n, scale, offset)));
        if (wtype != DType::Q8_0)
            return void(w.tensor(name, static_cast<uint32_t>(wtype), ne, quant_blocks(name, seed, wtype, n)));
        w.tensor(name, static_cast<uint32_t>(DType::Q8_0), ne, q8_0_rows(values(name, seed, n, scale, offset), ne[0]));
    };
    auto norm = [&](const std::string& name, uint64_t n) { add(name, {n}, 0.1, 1.0); };
    add("token_embd.weight", {E, V}, 0.5, 0.0);
    norm("output_norm.weight", E);
    if (!c["tied"].get<bool>()) add("output.weight", {E, V}, 0.2, 0.0);
    for (uint32_t il = 0; il < L; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        norm(p + "attn_norm.weight", E);
        if (flag("fused")) {
            add(p + "attn_qkv.weight", {E, q + 2 * kv}, 0.2, 0.0);
        } else {
            add(p + "attn_q.weight", {E, q}, 0.2, 0.0);
            add(p + "attn_k.weight", {E, kv}, 0.2, 0.0);
            add(p + "attn_v.weight", {E, kv}, 0.2, 0.0);
        }
        add(p + "attn_output.weight", {q, E}, 0.2, 0.0);
        if (flag("qk_norm")) norm(p + "attn_q_norm.weight", hd), norm(p + "attn_k_norm.weight", hd);
        if (flag("post_norms")) norm(p + "post_attention_norm.weight", E), norm(p + "post_ffw_norm.weight", E);
        norm(p + "ffn_norm.weight", E);
        if (n_exp) {
            const uint32_t Fe = c.value("n_ff_exp", F);
            add(p + "ffn_gate_inp.weight", {E, n_exp}, 0.5, 0.0);
            add(p + "ffn_gate_exps.weight", {E, Fe, n_exp}, 0.2, 0.0);
            add(p + "ffn_up_exps.weight", {E, Fe, n_exp}, 0.2, 0.0);
            add(p + "ffn_down_exps.weight", {Fe, E, n_exp}, 0.2, 0.0);
            if (const uint32_t S = c.value("n_ff_shexp", 0u)) {
                add(p + "ffn_gate_shexp.weight", {E, S}, 0.2, 0.0);
                add(p + "ffn_up_shexp.weight", {E, S}, 0.2, 0.0);
                add(p + "ffn_down_shexp.weight", {S, E}, 0.2, 0.0);
            }
        } else if (flag("fused")) {
            add(p + "ffn_up.weight", {E, 2 * F}, 0.2, 0.0);
            add(p + "ffn_down.weight", {F, E}, 0.2, 0.0);
        } else {
            add(p + "ffn_gate.weight", {E, F}, 0.2, 0.0);
            add(p + "ffn_up.weight", {E, F}, 0.2, 0.0);
            add(p + "ffn_down.weight", {F, E}, 0.2, 0.0);
        }
        if (c["qkv_bias"].get<bool>()) {
            add(p + "attn_q.bias", {q}, 0.1, 0.0);
            add(p + "attn_k.bias", {kv}, 0.1, 0.0);
            add(p + "attn_v.bias", {kv}, 0.1, 0.0);
        }
        if (flag("out_bias")) add(p + "attn_output.bias", {E}, 0.1, 0.0);
    }
    const uint64_t half_rot = c["n_rot"].get<uint64_t>() / 2;
    if (c["rope_freqs"].get<bool>()) add("rope_freqs.weight", {half_rot}, 0.5, 1.5);
    if (flag("rope_factors")) {
        add("rope_factors_long.weight", {half_rot}, 0.5, 2.0);
        add("rope_factors_short.weight", {half_rot}, 0.2, 1.0);
    }
    w.write(path);
}

}  // namespace strata::test

#include "tests/support/arch_files.h"

#include "models/gguf_file.h"
#include "models/hparams.h"

namespace strata::test {

namespace {
void common_keys(GgufWriter& w, const std::string& arch) {
    w.kv_string("general.architecture", arch);
    w.kv_u32(arch + ".context_length", 4096).kv_u32(arch + ".embedding_length", 32).kv_u32(arch + ".block_count", 2);
    w.kv_u32(arch + ".feed_forward_length", 64).kv_u32(arch + ".attention.head_count", 4);
    w.kv_u32(arch + ".expert_count", 4).kv_u32(arch + ".expert_used_count", 2);
    w.kv_u32(arch + ".expert_feed_forward_length", 16);
}
}  // namespace

void deepseek2_keys(GgufWriter& w) {
    common_keys(w, "deepseek2");
    w.kv_u32("deepseek2.attention.head_count_kv", 1).kv_u32("deepseek2.attention.kv_lora_rank", 16);
    w.kv_u32("deepseek2.attention.q_lora_rank", 24);
    w.kv_u32("deepseek2.attention.key_length", 24).kv_u32("deepseek2.attention.value_length", 16);
    w.kv_u32("deepseek2.attention.key_length_mla", 24).kv_u32("deepseek2.attention.value_length_mla", 8);
    w.kv_u32("deepseek2.rope.dimension_count", 8).kv_u32("deepseek2.leading_dense_block_count", 1);
    w.kv_u32("deepseek2.expert_shared_count", 1);
}

void gpt_oss_keys(GgufWriter& w) {
    common_keys(w, "gpt-oss");
    w.kv_u32("gpt-oss.attention.head_count_kv", 2).kv_u32("gpt-oss.attention.key_length", 8);
    w.kv_u32("gpt-oss.attention.value_length", 8).kv_u32("gpt-oss.attention.sliding_window", 16);
}

std::filesystem::path write_arch_file(const std::function<void(GgufWriter&)>& keys, const std::string& name,
                                      uint32_t matrix_type, const TensorEdit& edit) {
    // The hyperparameters come from the keys and the embedding's rows (the vocabulary).
    GgufWriter header;
    keys(header);
    header.tensor("token_embd.weight", 0, {32, 10}, std::vector<uint8_t>(32 * 10 * 4));
    const auto header_path = temp_path(name + "_header.gguf");
    header.write(header_path);
    const models::Hparams hp = models::Hparams::from_gguf(models::GgufFile::open(header_path));
    std::vector<models::TensorSpec> specs = models::global_tensors(hp);
    for (int il = 0; il < hp.n_layer; ++il)
        for (auto& s : models::layer_tensors(hp, il)) specs.push_back(s);
    std::vector<uint32_t> types;
    for (const auto& s : specs) types.push_back(s.matrix ? matrix_type : 0);
    if (edit) edit(specs, types);
    GgufWriter w;
    keys(w);
    for (size_t i = 0; i < specs.size(); ++i) {
        const auto& s = specs[i];
        const uint64_t n = uint64_t(s.ne[0]) * s.ne[1] * s.ne[2];
        std::vector<uint64_t> ne{uint64_t(s.ne[0])};
        if (s.ne[1] > 1 || s.ne[2] > 1) ne.push_back(uint64_t(s.ne[1]));
        if (s.ne[2] > 1) ne.push_back(uint64_t(s.ne[2]));
        w.tensor(s.name, types[i], ne, std::vector<uint8_t>(n * (types[i] == 1 ? 2 : 4)));
    }
    const auto path = temp_path(name + ".gguf");
    w.write(path);
    return path;
}

}  // namespace strata::test

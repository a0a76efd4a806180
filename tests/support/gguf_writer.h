#pragma once
// Writes small GGUF files for tests: well-formed ones, and broken ones on purpose (the
// writer does exactly what it is told, including lies about counts and offsets).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace strata::test {

class GgufWriter {
public:
    explicit GgufWriter(uint32_t version = 3) : version_(version) {}

    GgufWriter& kv_string(const std::string& key, const std::string& value);
    GgufWriter& kv_u32(const std::string& key, uint32_t value);
    GgufWriter& kv_f32(const std::string& key, float value);
    GgufWriter& kv_string_array(const std::string& key, const std::vector<std::string>& values);
    GgufWriter& kv_raw(const std::string& key, uint32_t type, const std::vector<uint8_t>& payload);
    // A tensor of `type_id` with dims `ne` and the given bytes; offsets are assigned in order.
    GgufWriter& tensor(const std::string& name, uint32_t type_id, std::vector<uint64_t> ne, std::vector<uint8_t> data);

    std::vector<uint8_t> bytes(uint32_t alignment = 32) const;
    void write(const std::filesystem::path& path) const;

    // Overrides applied by bytes(), to build broken files.
    uint64_t* tensor_count_override = nullptr;
    uint64_t extra_offset_for_last_tensor = 0;
    char magic[4] = {'G', 'G', 'U', 'F'};

private:
    struct Tensor {
        std::string name;
        uint32_t type;
        std::vector<uint64_t> ne;
        std::vector<uint8_t> data;
    };
    uint32_t version_;
    uint64_t n_kv_ = 0;
    std::vector<uint8_t> kv_;
    std::vector<Tensor> tensors_;
};

// A path under the build tree for test files, unique per name (in a folder of this process's).
std::filesystem::path temp_path(const std::string& name);
// Removes this process's folder of test files (the runner does, when every test passed; a failed
// run's files stay for a look).
void remove_temp_files();

}  // namespace strata::test

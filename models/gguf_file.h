#pragma once
// A validated, memory-mapped GGUF model file: metadata, tensor table and data section.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "models/gguf_value.h"

namespace strata::models {

// Upper bounds on counts and sizes read from the file, so that a hostile header cannot make
// the reader allocate or loop without limit.
struct GgufLimits {
    uint64_t max_tensors = 1u << 20;
    uint64_t max_kv = 1u << 16;
    uint64_t max_string_bytes = 1u << 26;   // 64 MiB (chat templates can be long)
    uint64_t max_array_items = 1u << 24;
    int max_array_depth = 4;
    int max_dims = 4;
};

struct TensorInfo {
    std::string name;
    DType type = DType::F32;
    int n_dims = 0;
    std::array<int64_t, 4> ne{1, 1, 1, 1};  // ne[0] is the contiguous (row) dimension
    uint64_t offset = 0;                     // relative to the data section
    uint64_t nbytes = 0;

    int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
public:
    // Parses and validates the whole header. Throws FormatError (naming the field, its value
    // and the byte offset) or IoError. With `map_data` false only the header is read: enough
    // for planning and inspecting without touching the weights.
    static GgufFile open(const std::filesystem::path& path, bool map_data = true, const GgufLimits& limits = {});
    GgufFile(GgufFile&&) noexcept;
    GgufFile& operator=(GgufFile&&) noexcept;
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;
    ~GgufFile();

    const std::filesystem::path& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t file_size() const { return file_size_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // absolute offset of the data section

    const std::map<std::string, GgufValue, std::less<>>& metadata() const { return kv_; }
    const GgufValue* find(std::string_view key) const;
    bool has(std::string_view key) const { return find(key) != nullptr; }
    // Typed getters: the required form throws FormatError naming a missing key.
    int64_t get_int(std::string_view key) const;
    std::optional<int64_t> get_int_opt(std::string_view key) const;
    double get_float(std::string_view key) const;
    std::optional<double> get_float_opt(std::string_view key) const;
    std::optional<bool> get_bool_opt(std::string_view key) const;
    std::string get_string(std::string_view key) const;
    std::optional<std::string> get_string_opt(std::string_view key) const;
    std::vector<std::string> get_string_array(std::string_view key) const;
    std::vector<float> get_float_array(std::string_view key) const;
    std::vector<int64_t> get_int_array(std::string_view key) const;

    std::span<const TensorInfo> tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;
    // Pointer to a tensor's bytes in the mapped data section (requires map_data).
    const std::byte* data(const TensorInfo& t) const;
    // Absolute file offset of a tensor's first byte, for direct (O_DIRECT) reads.
    uint64_t file_offset(const TensorInfo& t) const { return data_offset_ + t.offset; }

private:
    GgufFile() = default;
    friend class GgufParser;

    std::filesystem::path path_;
    uint32_t version_ = 0;
    uint64_t file_size_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_offset_ = 0;
    std::map<std::string, GgufValue, std::less<>> kv_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
    void* map_ = nullptr;
    size_t map_size_ = 0;
};

}  // namespace strata::models

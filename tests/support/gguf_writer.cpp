#include "tests/support/gguf_writer.h"

#include <unistd.h>

#include <cstring>
#include <fstream>

namespace strata::test {

namespace {
template <class T>
void put(std::vector<uint8_t>& out, T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
}
void put_str(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}
}  // namespace

GgufWriter& GgufWriter::kv_string(const std::string& key, const std::string& value) {
    put_str(kv_, key);
    put<uint32_t>(kv_, 8);
    put_str(kv_, value);
    ++n_kv_;
    return *this;
}

GgufWriter& GgufWriter::kv_u32(const std::string& key, uint32_t value) {
    put_str(kv_, key);
    put<uint32_t>(kv_, 4);
    put<uint32_t>(kv_, value);
    ++n_kv_;
    return *this;
}

GgufWriter& GgufWriter::kv_f32(const std::string& key, float value) {
    put_str(kv_, key);
    put<uint32_t>(kv_, 6);
    put<float>(kv_, value);
    ++n_kv_;
    return *this;
}

GgufWriter& GgufWriter::kv_string_array(const std::string& key, const std::vector<std::string>& values) {
    put_str(kv_, key);
    put<uint32_t>(kv_, 9);
    put<uint32_t>(kv_, 8);
    put<uint64_t>(kv_, values.size());
    for (const auto& v : values) put_str(kv_, v);
    ++n_kv_;
    return *this;
}

GgufWriter& GgufWriter::kv_raw(const std::string& key, uint32_t type, const std::vector<uint8_t>& payload) {
    put_str(kv_, key);
    put<uint32_t>(kv_, type);
    kv_.insert(kv_.end(), payload.begin(), payload.end());
    ++n_kv_;
    return *this;
}

GgufWriter& GgufWriter::tensor(const std::string& name, uint32_t type_id, std::vector<uint64_t> ne,
                               std::vector<uint8_t> data) {
    tensors_.push_back({name, type_id, std::move(ne), std::move(data)});
    return *this;
}

std::vector<uint8_t> GgufWriter::bytes(uint32_t alignment) const {
    std::vector<uint8_t> out(magic, magic + 4);
    put<uint32_t>(out, version_);
    put<uint64_t>(out, tensor_count_override ? *tensor_count_override : tensors_.size());
    put<uint64_t>(out, n_kv_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    uint64_t offset = 0;
    for (size_t i = 0; i < tensors_.size(); ++i) {
        const auto& t = tensors_[i];
        put_str(out, t.name);
        put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
        for (auto d : t.ne) put<uint64_t>(out, d);
        put<uint32_t>(out, t.type);
        put<uint64_t>(out, offset + (i + 1 == tensors_.size() ? extra_offset_for_last_tensor : 0));
        offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    for (const auto& t : tensors_) {
        out.insert(out.end(), t.data.begin(), t.data.end());
        out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    }
    return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
    auto b = bytes();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

namespace {
// One folder per process: ctest runs test cases in parallel processes.
std::filesystem::path process_temp_dir() { return std::filesystem::path(STRATA_BINARY_DIR) / "test_tmp" / std::to_string(::getpid()); }
}  // namespace

std::filesystem::path temp_path(const std::string& name) {
    static const auto dir = process_temp_dir();
    std::filesystem::create_directories(dir);
    return dir / name;
}

void remove_temp_files() {
    std::error_code ec;  // (nothing to remove, or a file in use: left)
    std::filesystem::remove_all(process_temp_dir(), ec);
}

}  // namespace strata::test

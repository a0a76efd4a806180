// Parses and validates a GGUF file (versions 2 and 3). Every count, length, offset and size
// read from the file is checked against the limits and the file size before it is used.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "models/gguf_file.h"

namespace strata::models {

namespace {
constexpr std::string_view kHintCorrupt = "the file is corrupt or truncated; download or convert it again";
}

// Bounds-checked little-endian reader over the mapped header.
class GgufParser {
public:
    GgufParser(const std::byte* base, uint64_t size, const GgufLimits& limits)
        : base_(base), size_(size), limits_(limits) {}

    void parse(GgufFile& f);

private:
    [[noreturn]] void fail(const std::string& what) const {
        throw FormatError(fmt::format("GGUF {} (at byte {})", what, pos_), std::string(kHintCorrupt));
    }

    void need(uint64_t n, std::string_view field) {
        if (n > size_ - pos_)
            fail(fmt::format("{} needs {} bytes but only {} remain: the file is truncated", field, n, size_ - pos_));
    }

    template <class T>
    T read(std::string_view field) {
        need(sizeof(T), field);
        T v;
        std::memcpy(&v, base_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }

    std::string read_string(std::string_view field) {
        auto len = read<uint64_t>(field);
        if (len > limits_.max_string_bytes)
            fail(fmt::format("{} has length {}, over the limit of {}", field, len, limits_.max_string_bytes));
        need(len, field);
        std::string s(reinterpret_cast<const char*>(base_ + pos_), len);
        pos_ += len;
        return s;
    }

    GgufValue read_value(GgufType type, const std::string& key, int depth);

    const std::byte* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
    const GgufLimits& limits_;
};

GgufValue GgufParser::read_value(GgufType type, const std::string& key, int depth) {
    GgufValue val;
    val.type = type;
    switch (type) {
        case GgufType::U8: val.v = uint64_t{read<uint8_t>(key)}; break;
        case GgufType::I8: val.v = int64_t{read<int8_t>(key)}; break;
        case GgufType::U16: val.v = uint64_t{read<uint16_t>(key)}; break;
        case GgufType::I16: val.v = int64_t{read<int16_t>(key)}; break;
        case GgufType::U32: val.v = uint64_t{read<uint32_t>(key)}; break;
        case GgufType::I32: val.v = int64_t{read<int32_t>(key)}; break;
        case GgufType::U64: val.v = read<uint64_t>(key); break;
        case GgufType::I64: val.v = read<int64_t>(key); break;
        case GgufType::F32: val.v = double{read<float>(key)}; break;
        case GgufType::F64: val.v = read<double>(key); break;
        case GgufType::BOOL: {
            auto b = read<uint8_t>(key);
            if (b > 1) fail(fmt::format("key '{}' is a bool with value {}", key, b));
            val.v = b == 1;
            break;
        }
        case GgufType::STRING: val.v = read_string(fmt::format("string value of key '{}'", key)); break;
        case GgufType::ARRAY: {
            if (depth >= limits_.max_array_depth)
                fail(fmt::format("key '{}' nests arrays deeper than {}", key, limits_.max_array_depth));
            auto arr = std::make_shared<GgufArray>();
            auto elem = read<uint32_t>(key);
            if (elem > static_cast<uint32_t>(GgufType::F64))
                fail(fmt::format("key '{}' is an array of unknown value type {}", key, elem));
            arr->elem_type = static_cast<GgufType>(elem);
            auto n = read<uint64_t>(key);
            if (n > limits_.max_array_items)
                fail(fmt::format("key '{}' has {} array items, over the limit of {}", key, n, limits_.max_array_items));
            // Every item takes at least one byte: a count beyond the remaining bytes is a lie.
            if (n > size_ - pos_)
                fail(fmt::format("key '{}' claims {} array items but only {} bytes remain", key, n, size_ - pos_));
            arr->items.reserve(n);
            for (uint64_t i = 0; i < n; ++i) arr->items.push_back(read_value(arr->elem_type, key, depth + 1));
            val.v = std::move(arr);
            break;
        }
        default: fail(fmt::format("key '{}' has unknown value type {}", key, static_cast<uint32_t>(type)));
    }
    return val;
}

void GgufParser::parse(GgufFile& f) {
    need(4, "magic");
    if (std::memcmp(base_, "GGUF", 4) != 0) {
        std::string shown;
        for (int i = 0; i < 4; ++i) {
            auto c = static_cast<unsigned char>(base_[i]);
            shown += (c >= 32 && c < 127) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
        }
        throw FormatError(fmt::format("not a GGUF file: magic is '{}', expected 'GGUF'", shown),
                          "pass a .gguf model file (convert other formats with llama.cpp's convert_hf_to_gguf.py)");
    }
    pos_ = 4;
    f.version_ = read<uint32_t>("version");
    if (f.version_ != 2 && f.version_ != 3)
        throw FormatError(fmt::format("GGUF version {} is not supported (supported: 2, 3)", f.version_),
                          "re-convert the model with a current llama.cpp");
    auto n_tensors = read<uint64_t>("tensor_count");
    auto n_kv = read<uint64_t>("metadata_kv_count");
    if (n_tensors > limits_.max_tensors)
        fail(fmt::format("tensor_count {} is over the limit of {}", n_tensors, limits_.max_tensors));
    if (n_kv > limits_.max_kv) fail(fmt::format("metadata_kv_count {} is over the limit of {}", n_kv, limits_.max_kv));

    for (uint64_t i = 0; i < n_kv; ++i) {
        auto key = read_string(fmt::format("key of metadata entry {}", i));
        auto type = read<uint32_t>(key);
        if (type > static_cast<uint32_t>(GgufType::F64))
            fail(fmt::format("key '{}' has unknown value type {}", key, type));
        auto value = read_value(static_cast<GgufType>(type), key, 0);
        if (!f.kv_.emplace(key, std::move(value)).second) fail(fmt::format("key '{}' appears twice", key));
    }

    if (auto* a = f.find("general.alignment")) {
        int64_t al = a->as_int("general.alignment");
        if (al <= 0 || (al & (al - 1)) != 0 || al > (1 << 20))
            fail(fmt::format("general.alignment is {}, expected a power of two", al));
        f.alignment_ = static_cast<uint64_t>(al);
    }

    f.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t;
        t.name = read_string(fmt::format("name of tensor {}", i));
        if (t.name.empty() || t.name.size() > 256) fail(fmt::format("tensor {} has a name of length {}", i, t.name.size()));
        auto n_dims = read<uint32_t>(t.name);
        if (n_dims == 0 || n_dims > static_cast<uint32_t>(limits_.max_dims))
            fail(fmt::format("tensor '{}' has {} dimensions (1..{} allowed)", t.name, n_dims, limits_.max_dims));
        t.n_dims = static_cast<int>(n_dims);
        uint64_t total = 1;
        for (uint32_t d = 0; d < n_dims; ++d) {
            auto ne = read<uint64_t>(t.name);
            if (ne == 0 || ne > (uint64_t{1} << 40) || total > (uint64_t{1} << 50) / ne)
                fail(fmt::format("tensor '{}' dimension {} is {} (zero or overflowing)", t.name, d, ne));
            total *= ne;
            t.ne[d] = static_cast<int64_t>(ne);
        }
        auto type_id = read<uint32_t>(t.name);
        auto tr = dtype_traits(type_id);
        if (!tr)
            throw FormatError(fmt::format("GGUF tensor '{}' has type id {}, which Strata does not know", t.name, type_id),
                              fmt::format("use a model quantized to one of: {}", computable_dtype_list()));
        t.type = tr->type;
        if (t.ne[0] % tr->block_elems != 0)
            fail(fmt::format("tensor '{}' has rows of {} values, not a multiple of the {} block size {}", t.name,
                             t.ne[0], tr->name, tr->block_elems));
        t.nbytes = total / tr->block_elems * tr->block_bytes;
        t.offset = read<uint64_t>(t.name);
        if (t.offset % f.alignment_ != 0)
            fail(fmt::format("tensor '{}' data offset {} is not a multiple of the alignment {}", t.name, t.offset,
                             f.alignment_));
        if (!f.tensor_index_.emplace(t.name, f.tensors_.size()).second)
            fail(fmt::format("tensor '{}' appears twice", t.name));
        f.tensors_.push_back(std::move(t));
    }

    f.data_offset_ = (pos_ + f.alignment_ - 1) / f.alignment_ * f.alignment_;
    const uint64_t data_size = f.file_size_ >= f.data_offset_ ? f.file_size_ - f.data_offset_ : 0;
    for (const auto& t : f.tensors_) {
        if (t.offset > data_size || t.nbytes > data_size - t.offset)
            throw FormatError(fmt::format("GGUF tensor '{}' (bytes {}..{} of the data section) extends past the end "
                                          "of the file ({} data bytes): the file is truncated",
                                          t.name, t.offset, t.offset + t.nbytes, data_size),
                              std::string(kHintCorrupt));
    }
}

GgufFile GgufFile::open(const std::filesystem::path& path, bool map_data, const GgufLimits& limits) {
    // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        throw IoError(fmt::format("cannot open model file '{}': {}", path.string(), std::strerror(e)),
                      e == ENOENT ? "check the path, or name no model to use the default one" : "");
    }
    struct stat st{};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw IoError(fmt::format("model path '{}' is not a regular file", path.string()), "give the path of a .gguf file");
    }
    GgufFile f;
    f.path_ = path;
    f.file_size_ = static_cast<uint64_t>(st.st_size);
    if (f.file_size_ < 24) {
        ::close(fd);
        throw FormatError(fmt::format("'{}' is {} bytes, too small to be a GGUF file", path.string(), f.file_size_),
                          std::string(kHintCorrupt));
    }
    void* m = ::mmap(nullptr, f.file_size_, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) throw IoError(fmt::format("cannot mmap '{}': {}", path.string(), std::strerror(errno)));
    f.map_ = m;
    f.map_size_ = f.file_size_;
    GgufParser(static_cast<const std::byte*>(m), f.file_size_, limits).parse(f);  // f unmaps on throw
    if (!map_data) {
        ::munmap(f.map_, f.map_size_);
        f.map_ = nullptr;
        f.map_size_ = 0;
    }
    return f;
}

GgufFile::GgufFile(GgufFile&& o) noexcept { *this = std::move(o); }

GgufFile& GgufFile::operator=(GgufFile&& o) noexcept {
    if (this != &o) {
        if (map_) ::munmap(map_, map_size_);
        path_ = std::move(o.path_);
        version_ = o.version_;
        file_size_ = o.file_size_;
        alignment_ = o.alignment_;
        data_offset_ = o.data_offset_;
        kv_ = std::move(o.kv_);
        tensors_ = std::move(o.tensors_);
        tensor_index_ = std::move(o.tensor_index_);
        map_ = std::exchange(o.map_, nullptr);
        map_size_ = std::exchange(o.map_size_, 0);
    }
    return *this;
}

GgufFile::~GgufFile() {
    if (map_) ::munmap(map_, map_size_);
}

const std::byte* GgufFile::data(const TensorInfo& t) const {
    STRATA_ASSERT(map_ != nullptr);
    return static_cast<const std::byte*>(map_) + data_offset_ + t.offset;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace strata::models

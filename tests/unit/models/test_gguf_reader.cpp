#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include "core/error.h"
#include "models/gguf_file.h"
#include "models/hparams.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"

using namespace strata;
using namespace strata::models;
using strata::test::GgufWriter;

namespace {

std::vector<uint8_t> f32_bytes(std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

GgufWriter small_file() {
    GgufWriter w;
    w.kv_string("general.architecture", "llama").kv_u32("llama.block_count", 2).kv_f32("llama.rope.freq_base", 500000.f);
    w.kv_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
    w.tensor("t.weight", 0, {4, 2}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
    w.tensor("q.weight", 8, {32}, std::vector<uint8_t>(34, 1));  // one Q8_0 block
    return w;
}

std::filesystem::path write_bytes(const std::string& name, const std::vector<uint8_t>& b) {
    auto p = test::temp_path(name);
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return p;
}

std::string open_error(const std::vector<uint8_t>& b) {
    auto p = write_bytes("broken.gguf", b);
    try {
        GgufFile::open(p);
    } catch (const FormatError& e) {
        return e.what();
    }
    return "no error";
}

template <class T>
void put(std::vector<uint8_t>& out, T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace

TEST_CASE("a well-formed GGUF file parses into metadata, tensors and data", "[unit][gguf]") {
    auto p = test::temp_path("small.gguf");
    small_file().write(p);
    auto f = GgufFile::open(p);
    CHECK(f.version() == 3);
    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.get_int("llama.block_count") == 2);
    CHECK(f.get_float("llama.rope.freq_base") == Approx(500000.0));
    CHECK(f.get_string_array("tokenizer.ggml.tokens") == std::vector<std::string>{"a", "b", "c"});
    CHECK_FALSE(f.get_int_opt("llama.missing"));
    CHECK_THROWS_WITH(f.get_int("llama.missing"), Catch::Contains("'llama.missing' is missing"));
    CHECK_THROWS_WITH(f.get_int("general.architecture"), Catch::Contains("expected an integer"));

    REQUIRE(f.tensors().size() == 2);
    const TensorInfo* t = f.find_tensor("t.weight");
    REQUIRE(t);
    CHECK(t->ne[0] == 4);
    CHECK(t->ne[1] == 2);
    CHECK(t->nbytes == 32);
    const float* d = reinterpret_cast<const float*>(f.data(*t));
    CHECK(d[0] == 1.0f);
    CHECK(d[7] == 8.0f);
    const TensorInfo* q = f.find_tensor("q.weight");
    REQUIRE(q);
    CHECK(q->type == DType::Q8_0);
    CHECK(q->nbytes == 34);
    CHECK(f.file_offset(*q) % 32 == 0);
}

TEST_CASE("every metadata value type, nested arrays included, round-trips", "[unit][gguf]") {
    std::vector<uint8_t> nested;  // array of 2 arrays of i16
    put<uint32_t>(nested, 9);
    put<uint64_t>(nested, 2);
    for (int16_t base : {-3, 7}) {
        put<uint32_t>(nested, 3);
        put<uint64_t>(nested, 2);
        put<int16_t>(nested, base);
        put<int16_t>(nested, static_cast<int16_t>(base + 1));
    }
    std::vector<uint8_t> u8{200}, i8{0x80}, u64, i64, f64, b{1};
    put<uint64_t>(u64, 1ull << 40);
    put<int64_t>(i64, -(1ll << 40));
    put<double>(f64, 0.125);
    GgufWriter w;
    w.kv_raw("u8", 0, u8).kv_raw("i8", 1, i8).kv_raw("u64", 10, u64).kv_raw("i64", 11, i64).kv_raw("f64", 12, f64);
    w.kv_raw("bool", 7, b).kv_raw("nested", 9, nested);
    auto p = test::temp_path("types.gguf");
    w.write(p);
    auto f = GgufFile::open(p);
    CHECK(f.get_int("u8") == 200);
    CHECK(f.get_int("i8") == -128);
    CHECK(f.get_int("u64") == (1ll << 40));
    CHECK(f.get_int("i64") == -(1ll << 40));
    CHECK(f.get_float("f64") == 0.125);
    CHECK(f.get_bool_opt("bool") == true);
    const auto& outer = f.find("nested")->as_array("nested");
    REQUIRE(outer.items.size() == 2);
    const auto& second = outer.items[1].as_array("nested");
    CHECK(second.items[0].as_int("x") == 7);
    CHECK(second.items[1].as_int("x") == 8);
    CHECK(f.find("nested")->to_display() == "[2 x array: [2 x i16: -3, -2], [2 x i16: 7, 8]]");
}

TEST_CASE("every truncation of a GGUF file is reported, never read past the end", "[unit][gguf]") {
    const auto full = small_file().bytes();
    // The last tensor (34 bytes) sits in a 64-byte aligned slot at the end; anything shorter is truncated.
    const size_t needed = full.size() - 64 + 34;
    for (size_t n = 0; n < needed; ++n) {
        std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
        INFO("truncated to " << n << " bytes");
        CHECK(open_error(cut) != "no error");
    }
}

TEST_CASE("broken GGUF headers give one error naming the field and value", "[unit][gguf]") {
    SECTION("wrong magic") {
        auto w = small_file();
        std::memcpy(w.magic, "GGML", 4);
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("magic is 'GGML'"));
    }
    SECTION("unsupported version") {
        auto b = small_file().bytes();
        b[4] = 1;
        CHECK_THAT(open_error(b), Catch::Contains("version 1 is not supported"));
    }
    SECTION("tensor past the end of the file") {
        auto w = small_file();
        w.extra_offset_for_last_tensor = 4096;
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("'q.weight'") && Catch::Contains("past the end"));
    }
    SECTION("misaligned tensor offset") {
        auto w = small_file();
        w.extra_offset_for_last_tensor = 4;
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("not a multiple of the alignment"));
    }
    SECTION("unknown tensor type") {
        GgufWriter w;
        w.tensor("x", 99, {32}, std::vector<uint8_t>(64, 0));
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("'x' has type id 99"));
    }
    SECTION("row not a multiple of the block size") {
        GgufWriter w;
        w.tensor("x", 2, {33}, std::vector<uint8_t>(64, 0));
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("not a multiple of the Q4_0 block size 32"));
    }
    SECTION("absurd tensor count") {
        auto w = small_file();
        uint64_t huge = 1ull << 40;
        w.tensor_count_override = &huge;
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("tensor_count 1099511627776"));
    }
    SECTION("string length past the end") {
        GgufWriter w;
        std::vector<uint8_t> payload;
        put<uint64_t>(payload, 1ull << 20);
        w.kv_raw("name", 8, payload);
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("the file is truncated"));
    }
    SECTION("dimension overflow") {
        GgufWriter w;
        w.tensor("x", 0, {1ull << 35, 1ull << 35}, {});
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("'x' dimension 1"));
    }
    SECTION("invalid bool") {
        GgufWriter w;
        w.kv_raw("flag", 7, {2});
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("'flag' is a bool with value 2"));
    }
    SECTION("duplicate key") {
        GgufWriter w;
        w.kv_u32("a", 1).kv_u32("a", 2);
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("'a' appears twice"));
    }
    SECTION("unknown value type") {
        GgufWriter w;
        w.kv_raw("k", 42, {});
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("'k' has unknown value type 42"));
    }
    SECTION("array count larger than the file") {
        GgufWriter w;
        std::vector<uint8_t> payload;
        put<uint32_t>(payload, 0);
        put<uint64_t>(payload, 1ull << 23);
        w.kv_raw("arr", 9, payload);
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("claims 8388608 array items"));
    }
    SECTION("alignment not a power of two") {
        auto w = small_file();
        w.kv_u32("general.alignment", 24);
        CHECK_THAT(open_error(w.bytes()), Catch::Contains("general.alignment is 24"));
    }
}

TEST_CASE("a missing model file is an I/O error naming the path", "[unit][gguf]") {
    CHECK_THROWS_AS(GgufFile::open("/nonexistent/model.gguf"), IoError);
    CHECK_THROWS_WITH(GgufFile::open("/nonexistent/model.gguf"), Catch::Contains("/nonexistent/model.gguf"));
}

TEST_CASE("a model path that is not a regular file is refused at once: a folder, a FIFO without a writer", "[unit][gguf]") {
    const auto dir = test::temp_path("not_a_file");
    std::filesystem::create_directories(dir);
    CHECK_THROWS_WITH(GgufFile::open(dir), Catch::Contains("is not a regular file"));
    const auto fifo = dir / "fifo";
    std::filesystem::remove(fifo);
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(GgufFile::open(fifo), Catch::Contains("is not a regular file"));  // opening it waited for a writer
    std::filesystem::remove_all(dir);
}

TEST_CASE("an unsupported architecture is refused with the supported list", "[unit][gguf]") {
    GgufWriter w;
    w.kv_string("general.architecture", "mamba");
    auto p = test::temp_path("mamba.gguf");
    w.write(p);
    auto f = GgufFile::open(p);
    try {
        Hparams::from_gguf(f);
        FAIL("no error");
    } catch (const FormatError& e) {
        CHECK_THAT(e.what(), Catch::Contains("'mamba' is not supported"));
        CHECK_THAT(e.hint(), Catch::Contains("llama, mistral, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3"));
    }
}

TEST_CASE("stories260K's header matches its published hyperparameters", "[unit][gguf]") {
    auto path = test::stories260k_path();
    STRATA_REQUIRE_MODEL(path, "../shared/models/stories260K.gguf");
    auto f = GgufFile::open(*path, false);
    CHECK(f.tensors().size() == 48);
    auto hp = Hparams::from_gguf(f);
    CHECK(hp.n_vocab == 512);
    CHECK(hp.n_embd == 64);
    CHECK(hp.n_layer == 5);
    CHECK(hp.n_head == 8);
    CHECK(hp.n_head_kv == 4);
    CHECK(hp.head_dim == 8);
    CHECK(hp.n_ff == 172);
    CHECK(hp.rope_freq_base == 10000.0f);
}

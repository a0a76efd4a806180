// The GPU weight kernels' block arithmetic (gpu/kernels/block_*.h), compiled for the host and
// checked on the host against cpu/quant_ref: the same code runs inside the CUDA kernels, so a
// wrong decoder or quantizer fails here, in CI, without a GPU. The integer parts are exact; the
// float products agree to rounding (the compiler may fuse a multiply and an add in one and not
// the other), the quantizer's bytes exactly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "cpu/quant_ref.h"
#include "gpu/kernels/block_dot_k.h"
#include "gpu/kernels/block_quantize.h"
#include "gpu/kernels/block_types.h"
#include "tests/support/random_values.h"
#include "tests/support/random_weights.h"

using namespace strata;
namespace blocks = strata::gpu::blocks;

namespace {

constexpr int64_t kRows = 3;

int64_t cols_for(DType type) { return traits(type).block_elems == 256 ? 3 * 256 : 7 * 32; }

// Equal to rounding: within a few float steps of `scale` (a NaN fails, as it should).
bool close(float a, float b, double scale) { return std::abs(double(a) - double(b)) <= 1e-6 * scale; }

template <class B>
void check_values(DType type) {
    std::mt19937 rng(7);
    const int64_t n = cols_for(type);
    const auto w = test::random_weights(type, kRows, n, rng);
    for (int64_t r = 0; r < kRows; ++r) {
        const uint8_t* row = w.data() + r * row_bytes(type, n);
        std::vector<float> ref(n);
        cpu::dequantize_row_ref(type, row, ref.data(), n);
        int64_t bad = 0;
        for (int64_t c = 0; c < n / 32; ++c) {
            double amax = 0;  // the chunk's scale of values
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(double(ref[32 * c + j])));
            for (int part = 0; part < 4; ++part) {
                float v[8];
                B::values8(row, c, part, v);
                for (int t = 0; t < 8; ++t) bad += !close(v[t], ref[32 * c + 8 * part + t], amax);
            }
        }
        CHECK(bad == 0);
    }
}

template <class B>
void check_dots(DType type) {
    std::mt19937 rng(11);
    const int64_t n = cols_for(type);
    const auto w = test::random_weights(type, kRows, n, rng);
    for (const cpu::ActFormat fmt : {cpu::ActFormat::Q8x2, cpu::ActFormat::Q8}) {
        INFO((fmt == cpu::ActFormat::Q8 ? "single-level" : "two-level") << " activations");
        const auto x = test::normal_floats(n, 12);
        std::vector<uint8_t> act(cpu::act_q8x2_bytes(n));
        cpu::quantize_act_ref(fmt, x.data(), act.data(), n);
        const blocks::ActRow a = blocks::act_row(act.data(), n);
        for (int64_t r = 0; r < kRows; ++r) {
            const uint8_t* row = w.data() + r * row_bytes(type, n);
            float acc = 0.0f;  // chunk by chunk, in order: the reference's sum exactly
            for (int64_t c = 0; c < n / 32; ++c) B::template dot_chunk<1>(row, c, &a, fmt == cpu::ActFormat::Q8x2, &acc);
            const float ref = cpu::vec_dot_ref(type, row, act.data(), n);
            std::vector<float> wf(n), af(n);
            cpu::dequantize_row_ref(type, row, wf.data(), n);
            cpu::dequantize_act_ref(cpu::ActFormat::Q8x2, act.data(), af.data(), n);
            double magnitude = 0;
            for (int64_t k = 0; k < n; ++k) magnitude += std::abs(double(wf[k]) * af[k]);
            INFO("row " << r << ": " << acc << " vs " << ref);
            CHECK(close(acc, ref, magnitude));
        }
    }
}

// The decode kernel's tile path (gpu/kernels/matvec.cu), every type: each tile of up to
// kTileChunks chunks staged as the kernel stages it (tile_at's words from the one at or before
// its first byte, tile_word zeroing what lies past the row), at the row's own alignment mod 16,
// and summed chunk by chunk gives the row's own sum, bit for bit; no word reads past the row's
// end (the weights' end for the last row). Rows of 5 x 256 values start at every even offset
// mod 16 where their bytes allow (Q6_K's), and MXFP4's rows of an odd number of blocks at odd
// ones too.
template <class B>
void check_tiles(DType type) {
    std::mt19937 rng(17);
    std::vector<int64_t> widths = {20 * 256, 5 * 256};
    if (B::kValues == blocks::kActBlock) widths.insert(widths.end(), {int64_t{2880}, int64_t{33 * 32}});
    for (const int64_t n : widths) {
        const int64_t chunks = n / blocks::kActBlock, rb = int64_t(row_bytes(type, n)), rows = 9;
        INFO(n << " columns");
        const auto w = test::random_weights(type, rows, n, rng);
        std::vector<std::byte> held(w.size() + 32, std::byte{0xAB});  // the weights 16-byte aligned, then bytes not to read
        auto* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(held.data()) + 15) & ~uintptr_t{15});
        std::copy(w.begin(), w.end(), base);
        const auto x = test::normal_floats(n, 18);
        std::vector<uint8_t> act(cpu::act_q8x2_bytes(n));
        cpu::quantize_act_ref(cpu::ActFormat::Q8x2, x.data(), act.data(), n);
        const blocks::ActRow a = blocks::act_row(act.data(), n);
        for (int64_t r = 0; r < rows; ++r) {
            INFO("row " << r);
            const uint8_t* row = base + r * rb;
            float whole = 0.0f, tiled = 0.0f;
            for (int64_t c = 0; c < chunks; ++c) B::template dot_chunk<1>(row, c, &a, true, &whole);
            for (int64_t c0 = 0; c0 < chunks; c0 += blocks::kTileChunks) {
                const int64_t k = std::min(blocks::kTileChunks, chunks - c0);
                const uint8_t* begin = row + blocks::chunk_offset<B>(c0);
                const int64_t bytes = blocks::chunk_offset<B>(k);
                const blocks::Tile t = blocks::tile_at<B>(row, c0, k);
                REQUIRE(t.words <= blocks::kTileWords<B>);
                REQUIRE(t.from >= base);
                alignas(16) uint32_t staged[blocks::kTileWords<B> * 4];
                for (int i = 0; i < t.words; ++i) blocks::tile_word(t.from + 16 * i, row + rb, staged + 4 * i);
                const auto* tile = reinterpret_cast<const uint8_t*>(staged) + t.skip;
                CHECK((reinterpret_cast<uintptr_t>(tile) - reinterpret_cast<uintptr_t>(begin)) % 16 == 0);
                CHECK(std::equal(tile, tile + bytes, begin));
                const uint8_t* past = reinterpret_cast<const uint8_t*>(staged) + 16 * t.words;
                if (c0 + k == chunks) CHECK(std::all_of(tile + bytes, past, [](uint8_t b) { return b == 0; }));
                const blocks::ActRow from = blocks::act_from(a, c0);
                for (int64_t c = 0; c < k; ++c) B::template dot_chunk<1>(tile, c, &from, true, &tiled);
            }
            CHECK(tiled == whole);
        }
    }
}

template <class B>
void check_type(DType type) {
    INFO(dtype_name(type));
    REQUIRE(B::kValues == traits(type).block_elems);
    REQUIRE(B::kBytes == static_cast<int>(traits(type).block_bytes));
    check_values<B>(type);
    check_dots<B>(type);
    check_tiles<B>(type);
}

}  // namespace

TEST_CASE("gpu block decoders on the host equal dequantize_row_ref and vec_dot_ref", "[unit][gpu_blocks]") {
    check_type<blocks::BlockQ4_0>(DType::Q4_0);
    check_type<blocks::BlockQ4_1>(DType::Q4_1);
    check_type<blocks::BlockQ5_0>(DType::Q5_0);
    check_type<blocks::BlockQ5_1>(DType::Q5_1);
    check_type<blocks::BlockQ8_0>(DType::Q8_0);
    check_type<blocks::BlockIQ4_NL>(DType::IQ4_NL);
    check_type<blocks::BlockMXFP4>(DType::MXFP4);
    check_type<blocks::BlockQ2_K>(DType::Q2_K);
    check_type<blocks::BlockQ3_K>(DType::Q3_K);
    check_type<blocks::BlockQ4_K>(DType::Q4_K);
    check_type<blocks::BlockQ5_K>(DType::Q5_K);
    check_type<blocks::BlockQ6_K>(DType::Q6_K);
    check_type<blocks::BlockQ8_K>(DType::Q8_K);
    check_type<blocks::BlockIQ4_XS>(DType::IQ4_XS);
}

TEST_CASE("gpu block types on the host: every quantized CPU weight type has a GPU block", "[unit][gpu_blocks]") {
    for (uint32_t id = 0; id < 64; ++id) {
        const auto t = dtype_traits(id);
        if (!t || !t->computable || t->block_elems == 1) continue;
        INFO(t->name);
        CHECK(blocks::gpu_block_type(t->type));
    }
}

TEST_CASE("gpu codebook words on the host spell cpu::kIq4Values and cpu::kMxfp4Values", "[unit][gpu_blocks]") {
    const std::pair<blocks::Codebook, const int8_t*> books[] = {{blocks::iq4_codebook(), cpu::kIq4Values},
                                                                {blocks::mxfp4_codebook(), cpu::kMxfp4Values}};
    for (const auto& [book, values] : books)
        for (int i = 0; i < 16; ++i) {
            INFO("index " << i);
            CHECK(blocks::codebook_value(book, i) == values[i]);
            // Four indices at once, in every byte position.
            const uint32_t idx = uint32_t(i) | uint32_t((i + 5) % 16) << 8 | uint32_t((i + 9) % 16) << 16 | uint32_t(15 - i) << 24;
            const uint32_t v = blocks::lookup4(book, idx);
            CHECK(int8_t(v >> 8) == values[(i + 5) % 16]);
            CHECK(int8_t(v >> 24) == values[15 - i]);
        }
}

TEST_CASE("gpu activation quantizer on the host writes quantize_act_ref's bytes", "[unit][gpu_blocks]") {
    const int64_t n = 9 * 32;
    auto x = test::normal_floats(n, 21);
    for (int j = 64; j < 96; ++j) x[j] = 0.0f;   // a zero block
    for (int j = 96; j < 128; ++j) x[j] *= 1e6f;  // a large one
    x[130] = 0.5f * 127.0f;                        // ties at the rounding of the high level
    for (const cpu::ActFormat fmt : {cpu::ActFormat::Q8x2, cpu::ActFormat::Q8}) {
        std::vector<uint8_t> ref(cpu::act_q8x2_bytes(n), 0), got(blocks::act_row_bytes(n), 0);
        REQUIRE(got.size() == ref.size());
        cpu::quantize_act_ref(fmt, x.data(), ref.data(), n);
        for (int64_t b = 0; b < n / 32; ++b) blocks::quantize_block_q8x2(x.data(), got.data(), n, b, fmt == cpu::ActFormat::Q8x2);
        CHECK(got == ref);
    }
}

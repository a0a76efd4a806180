// cpu::matmul against a naive float matmul of the dequantized weights, and against the
// reference vec_dot, for several token counts, odd row counts, every path and thread count.
#include <sys/mman.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "cpu/cpu_features.h"
#include "cpu/gemm_x86.h"
#include "cpu/matmul.h"
#include "cpu/onednn_matmul.h"
#include "cpu/quant.h"
#include "cpu/quant_ref.h"
#include "cpu/thread_pool.h"
#include "tests/support/random_weights.h"
#include "tests/support/skip.h"

using namespace strata;
using namespace strata::cpu;

using test::random_weights;

namespace {
struct Case { DType type; int64_t n_cols; };
}  // namespace

TEST_CASE("matmul matches naive float matmul and the reference dot", "[unit]") {
    const Case cases[] = {
        {DType::F32, 45},    {DType::F16, 64},    {DType::BF16, 77},   {DType::Q4_0, 96},
        {DType::Q4_1, 64},   {DType::Q5_0, 160},  {DType::Q5_1, 32},   {DType::Q8_0, 224},
        {DType::Q4_K, 512},  {DType::Q5_K, 256},  {DType::Q6_K, 768},  {DType::Q8_K, 256},
        {DType::Q2_K, 512},  {DType::Q3_K, 768},  {DType::IQ4_NL, 160}, {DType::IQ4_XS, 512},
        {DType::MXFP4, 96},
    };
    std::mt19937 rng(99);
    for (const auto& [type, n_cols] : cases) {
        for (int64_t n_rows : {1, 7, 33}) {
            for (int64_t n_tok : {1, 3, 17}) {
                INFO(dtype_name(type) << " rows " << n_rows << " cols " << n_cols << " tokens " << n_tok);
                const auto w = random_weights(type, n_rows, n_cols, rng);
                std::vector<float> x(n_tok * n_cols);
                std::normal_distribution<float> normal;
                for (auto& v : x) v = normal(rng);
                std::vector<float> y(n_tok * n_rows, NAN);
                matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, y.data());

                const ActFormat fmt = act_format_for(type);
                const size_t wrb = row_bytes(type, n_cols), arb = act_row_bytes(type, n_cols);
                std::vector<float> wf(n_rows * n_cols);
                for (int64_t r = 0; r < n_rows; ++r) dequantize_row_ref(type, w.data() + r * wrb, &wf[r * n_cols], n_cols);
                std::vector<uint8_t> a(arb);
                for (int64_t t = 0; t < n_tok; ++t) {
                    const float* xt = &x[t * n_cols];
                    quantize_act_ref(fmt, xt, a.data(), n_cols);
                    for (int64_t r = 0; r < n_rows; ++r) {
                        const float* wr = &wf[r * n_cols];
                        // Naive float matmul; the bound on the gap is the activations' rounding
                        // (Q8x2: amax/127/256 per value) weighted by |w|, plus float summation slack.
                        double naive = 0, qerr = 0, mag = 0;
                        for (int64_t b0 = 0; b0 < n_cols; b0 += 32) {
                            float amax = 0;
                            const int64_t b1 = std::min(n_cols, b0 + 32);
                            for (int64_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(xt[i]));
                            for (int64_t i = b0; i < b1; ++i) {
                                naive += double(wr[i]) * xt[i];
                                mag += std::fabs(wr[i] * xt[i]);
                                qerr += std::fabs(wr[i]) * (fmt == ActFormat::F32 ? 0.0 : amax / 127.0 / 256.0 * 1.001);
                            }
                        }
                        const float got = y[t * n_rows + r];
                        REQUIRE(std::fabs(got - naive) <= qerr + 1e-4 * mag + 1e-6);
                        // Against the scalar reference on the same quantized activations.
                        const float ref = vec_dot_ref(type, w.data() + r * wrb, a.data(), n_cols);
                        REQUIRE(std::fabs(got - ref) <= 1e-4 * (mag + std::fabs(ref)) + 1e-6);
                    }
                }
            }
        }
    }
}

TEST_CASE("matmul: same result on 1 and 2 threads and on every path", "[unit]") {
    const CpuPath saved = active_path();
    std::mt19937 rng(17);
    // Rows not a multiple of the 16-row tile, K not a multiple of 256 where the type allows it;
    // token counts on both sides of the decode/prefill switch (4) and of the 8-token groups.
    struct Shape { DType type; int64_t n_cols; };
    const Shape shapes[] = {{DType::Q4_0, 544}, {DType::Q4_1, 480}, {DType::Q8_0, 352}, {DType::Q5_0, 96},
                            {DType::Q5_1, 160}, {DType::Q4_K, 512}, {DType::Q5_K, 768}, {DType::Q6_K, 512},
                            {DType::Q8_K, 256}, {DType::F16, 200},  {DType::BF16, 130}, {DType::F32, 67},
                            {DType::Q2_K, 768}, {DType::Q3_K, 512}, {DType::IQ4_NL, 416}, {DType::IQ4_XS, 256},
                            {DType::MXFP4, 352}};
    for (const auto& [type, n_cols] : shapes) {
        for (int64_t n_tok : {1, 4, 5, 19}) {
            const int64_t n_rows = 301;
            INFO(dtype_name(type) << " tokens " << n_tok);
            const auto w = random_weights(type, n_rows, n_cols, rng);
            std::vector<float> x(n_tok * n_cols);
            std::normal_distribution<float> normal;
            for (auto& v : x) v = normal(rng);
            std::vector<float> y1(n_tok * n_rows), y2(n_tok * n_rows);
            tbb::task_arena(1).execute([&] { matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, y1.data()); });
            tbb::task_arena(2).execute([&] { matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, y2.data()); });
            // Each output is computed by one kernel call whatever the split: bit-identical.
            REQUIRE(y1 == y2);

            // Paths differ only in float summation order: allow 1e-5 of sum |w x| (the block terms
            // can be far larger than the result, so relative-to-result would be wrong).
            const size_t wrb = row_bytes(type, n_cols);
            std::vector<float> wf(n_cols);
            std::vector<double> mag(n_tok * n_rows, 0.0);
            for (int64_t r = 0; r < n_rows; ++r) {
                dequantize_row_ref(type, w.data() + r * wrb, wf.data(), n_cols);
                for (int64_t t = 0; t < n_tok; ++t)
                    for (int64_t i = 0; i < n_cols; ++i) mag[t * n_rows + r] += std::fabs(wf[i] * x[t * n_cols + i]);
            }
            set_active_path(CpuPath::Scalar);
            std::vector<float> yref(n_tok * n_rows);
            matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, yref.data());
            for (CpuPath path : {CpuPath::Avx2, CpuPath::Avx512}) {
                if (!path_supported(path)) continue;
                set_active_path(path);
                std::vector<float> yp(n_tok * n_rows, NAN);
                matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, yp.data());
                for (size_t i = 0; i < yp.size(); ++i) {
                    INFO("path " << path_name(path) << " i " << i);
                    REQUIRE(std::fabs(yp[i] - yref[i]) <= 1e-5 * mag[i] + 1e-30);
                }
            }
            set_active_path(saved);
        }
    }
}

TEST_CASE("matmul: weights tiled at load give the file layout's results and rows bit for bit, and untile back to its bytes", "[unit]") {
    if (!path_supported(CpuPath::Avx512))
        STRATA_SKIP("tiled weights are for the AVX-512 kernels, which this CPU cannot run");
    const CpuPath saved = active_path();
    set_active_path(CpuPath::Avx512);
    std::mt19937 rng(41);
    struct Shape { DType type; int64_t n_cols; };
    const Shape shapes[] = {{DType::Q4_0, 544}, {DType::Q4_1, 480}, {DType::Q8_0, 352}, {DType::Q5_0, 96},
                            {DType::Q5_1, 160}, {DType::Q4_K, 512}, {DType::Q5_K, 768}, {DType::Q6_K, 512},
                            {DType::Q8_K, 256}, {DType::Q2_K, 512}, {DType::Q3_K, 768}, {DType::IQ4_NL, 96},
                            {DType::IQ4_XS, 512}, {DType::MXFP4, 160}};
    for (const auto& [type, n_cols] : shapes) {
        for (int64_t n_rows : {16, 53}) {  // full tiles only; three and a partial one
            const auto w = random_weights(type, n_rows, n_cols, rng);
            auto tiled = w;
            REQUIRE(tile_weights(type, tiled.data(), n_rows, n_cols));
            const size_t full_bytes = n_rows / 16 * 16 * row_bytes(type, n_cols);
            // Rearranged in place: the full tiles changed, a partial last tile is left as it was.
            CHECK(!std::equal(w.begin(), w.begin() + full_bytes, tiled.begin()));
            CHECK(std::equal(w.begin() + full_bytes, w.end(), tiled.begin() + full_bytes));
            // And back: the file's bytes, every one, as a device that reads them is given them.
            // Q8_K's tiles leave out its block sums, which its kernels do not read.
            std::vector<uint8_t> untiled(w.size());
            REQUIRE(untile_weights(type, tiled.data(), untiled.data(), n_rows, n_cols) == (type != DType::Q8_K));
            if (type != DType::Q8_K) REQUIRE(untiled == w);
            // Rows read back from the tiles (embeddings tied to a tiled head, the bf16 prefill's
            // weights) as from the file: one at a time, all at once, and a range across tiles.
            std::vector<float> from_file(n_rows * n_cols), from_tiles(n_rows * n_cols);
            for (int64_t r = 0; r < n_rows; ++r)
                dequantize_row(type, w.data() + r * row_bytes(type, n_cols), from_file.data() + r * n_cols, n_cols);
            for (int64_t r = 0; r < n_rows; ++r) {
                std::vector<float> one(n_cols);
                dequantize_tiled_rows(type, tiled.data(), n_rows, n_cols, r, 1, one.data());
                INFO(dtype_name(type) << " row " << r);
                REQUIRE(std::equal(one.begin(), one.end(), from_file.begin() + r * n_cols));
            }
            dequantize_tiled_rows(type, tiled.data(), n_rows, n_cols, 0, n_rows, from_tiles.data());
            REQUIRE(from_tiles == from_file);
            const int64_t r0 = 5, n = n_rows - 7;
            std::vector<float> range(n * n_cols);
            dequantize_tiled_rows(type, tiled.data(), n_rows, n_cols, r0, n, range.data());
            REQUIRE(std::equal(range.begin(), range.end(), from_file.begin() + r0 * n_cols));
            for (int64_t n_tok : {1, 4, 5, 19}) {
                INFO(dtype_name(type) << " rows " << n_rows << " tokens " << n_tok);
                std::vector<float> x(n_tok * n_cols);
                std::normal_distribution<float> normal;
                for (auto& v : x) v = normal(rng);
                for (bool amx : {true, false}) {  // prefill on AMX tiles where the CPU has them, and VNNI
                    set_amx_enabled(amx);
                    std::vector<float> y_file(n_tok * n_rows, NAN), y_tiled(n_tok * n_rows, NAN);
                    matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, y_file.data());
                    matmul(type, tiled.data(), n_rows, n_cols, x.data(), n_tok, y_tiled.data(), false, true);
                    REQUIRE(y_tiled == y_file);
                }
                set_amx_enabled(true);
            }
        }
    }
    // Float weights have no tiled layout; other paths neither tile nor take tiled weights.
    std::vector<uint8_t> f16(row_bytes(DType::F16, 64) * 32);
    CHECK_FALSE(tile_weights(DType::F16, f16.data(), 32, 64));
    CHECK_FALSE(untile_weights(DType::F16, f16.data(), f16.data(), 32, 64));
    auto w = random_weights(DType::Q4_0, 32, 64, rng);
    REQUIRE(tile_weights(DType::Q4_0, w.data(), 32, 64));
    std::vector<float> x(64, 1.0f), y(32);
    if (path_supported(CpuPath::Avx2)) {
        set_active_path(CpuPath::Avx2);
        CHECK_FALSE(tile_weights(DType::Q4_0, w.data(), 32, 64));
        std::vector<uint8_t> untiled(w.size());
        CHECK_FALSE(untile_weights(DType::Q4_0, w.data(), untiled.data(), 32, 64));
        CHECK_THROWS_AS(matmul(DType::Q4_0, w.data(), 32, 64, x.data(), 1, y.data(), false, true), BackendError);
        CHECK_THROWS_AS(dequantize_tiled_rows(DType::Q4_0, w.data(), 32, 64, 3, 1, x.data()), BackendError);
    }
    set_active_path(saved);
}

TEST_CASE("matmul: each token's row has the bits it gets alone, at every token count a decode pass takes", "[unit]") {
    // A speculative pass verifies its draft's rows together and keeps the target's tokens only
    // if each row is what plain decoding computes alone; the decode kernels take up to 8 tokens
    // a pass (by type), the packed prefill kernel more, AMX (where the CPU has it) from 16 on,
    // which sums in another order: row_invariant_tokens() says up to where rows keep their bits.
    // The AVX2 kernels take up to 8 tokens a pass over a weight row, at any token count.
    if (!path_supported(CpuPath::Avx2))
        STRATA_SKIP("the SIMD kernels' token counts are what this checks, and this CPU runs none of them");
    const CpuPath saved = active_path();
    std::mt19937 rng(43);
    const Case cases[] = {{DType::Q4_0, 512}, {DType::Q4_1, 256}, {DType::Q5_0, 256}, {DType::Q5_1, 256},
                          {DType::Q8_0, 256}, {DType::IQ4_NL, 256}, {DType::MXFP4, 256}, {DType::Q4_K, 512},
                          {DType::Q5_K, 256}, {DType::IQ4_XS, 256}, {DType::Q6_K, 256}, {DType::Q3_K, 256},
                          {DType::Q2_K, 256}};
    constexpr int64_t n_rows = 70;  // four tiles and a partial one
    for (const auto& [type, n_cols] : cases) {
        const auto file = random_weights(type, n_rows, n_cols, rng);
        std::normal_distribution<float> normal;
        std::vector<float> x(17 * n_cols);
        for (auto& v : x) v = normal(rng);
        for (const CpuPath path : {CpuPath::Avx2, CpuPath::Avx512}) {
            if (!path_supported(path)) continue;
            set_active_path(path);
            std::vector<std::pair<bool, std::vector<uint8_t>>> layouts{{false, file}};  // is_tiled, weights
            if (path == CpuPath::Avx512) {  // and the AVX-512 kernels' tiles
                layouts.emplace_back(true, file);
                REQUIRE(tile_weights(type, layouts.back().second.data(), n_rows, n_cols));
            }
            for (const auto& [is_tiled, weights] : layouts) {
                const uint8_t* w = weights.data();
                std::vector<float> alone(17 * n_rows);
                for (int64_t t = 0; t < 17; ++t)
                    matmul(type, w, n_rows, n_cols, x.data() + t * n_cols, 1, alone.data() + t * n_rows, false, is_tiled);
                for (int64_t n_tok = 2; n_tok <= std::min<int64_t>(17, row_invariant_tokens()); ++n_tok) {
                    INFO(path_name(path) << ", " << dtype_name(type) << (is_tiled ? " tiled" : " file layout") << ", "
                                         << n_tok << " tokens");
                    std::vector<float> y(n_tok * n_rows, NAN);
                    matmul(type, w, n_rows, n_cols, x.data(), n_tok, y.data(), false, is_tiled);
                    CHECK(std::equal(y.begin(), y.end(), alone.begin()));
                }
            }
        }
    }
    set_active_path(saved);
}

TEST_CASE("matmul reads no byte past the weights: their last row ends where no page may be read", "[unit]") {
    const CpuPath saved = active_path();
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::mt19937 rng(53);
    const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K,  DType::Q3_K,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS,
                           DType::MXFP4};
    const int64_t n_rows = 32, n_cols = 512;
    for (DType type : types) {
        const size_t bytes = row_bytes(type, n_cols) * n_rows, span = (bytes + page - 1) / page * page;
        auto* map = static_cast<uint8_t*>(mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        REQUIRE(map != MAP_FAILED);
        REQUIRE(mprotect(map + span, page, PROT_NONE) == 0);  // a read past the weights faults
        uint8_t* w = map + span - bytes;
        const auto values = random_weights(type, n_rows, n_cols, rng);
        std::memcpy(w, values.data(), bytes);
        std::vector<float> x(5 * n_cols, 0.5f), y(5 * n_rows);
        for (CpuPath path : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512}) {
            if (!path_supported(path)) continue;
            set_active_path(path);
            INFO(dtype_name(type) << " path " << path_name(path));
            for (int64_t n_tok : {1, 5}) {  // decode and prefill, weights as laid out in the file
                matmul(type, w, n_rows, n_cols, x.data(), n_tok, y.data());
                CHECK(std::isfinite(y[0]));
            }
        }
        munmap(map, span + page);
    }
    set_active_path(saved);
}

TEST_CASE("matmul rejects types without CPU kernels", "[unit]") {
    std::vector<uint8_t> w(row_bytes(DType::Q8_1, 256));
    std::vector<float> x(256), y(1);
    CHECK_THROWS_AS(matmul(DType::Q8_1, w.data(), 1, 256, x.data(), 1, y.data()), BackendError);
}

TEST_CASE("matmul: AMX prefill gives the VNNI kernel's results", "[unit]") {
    if (!path_supported(CpuPath::Avx512) || !amx_usable()) STRATA_SKIP("no AMX on this CPU (or STRATA_AMX=0)");
    const CpuPath saved = active_path();
    set_active_path(CpuPath::Avx512);
    std::mt19937 rng(23);
    struct Shape { DType type; int64_t n_rows, n_cols, n_tok; };
    // Rows and tokens not multiples of 16; odd and even block counts (the pipeline's tail).
    const Shape shapes[] = {{DType::Q4_0, 67, 2048, 37}, {DType::Q4_1, 160, 576, 16}, {DType::Q8_0, 33, 96, 50},
                            {DType::Q4_K, 48, 768, 21},  {DType::Q5_K, 17, 512, 40}, {DType::Q4_0, 16, 32, 17},
                            {DType::Q5_0, 40, 160, 33},  {DType::Q5_1, 16, 96, 16},  {DType::Q8_K, 20, 512, 18},
                            {DType::IQ4_NL, 35, 224, 19}, {DType::IQ4_XS, 48, 512, 33},
                            {DType::MXFP4, 37, 288, 21}};
    for (const auto& [type, n_rows, n_cols, n_tok] : shapes) {
        INFO(dtype_name(type) << " " << n_rows << "x" << n_cols << " tokens " << n_tok);
        const auto w = random_weights(type, n_rows, n_cols, rng);
        std::vector<float> x(n_tok * n_cols);
        std::normal_distribution<float> normal;
        for (auto& v : x) v = normal(rng);
        std::vector<float> amx(n_tok * n_rows, NAN), vnni(n_tok * n_rows, NAN);
        matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, amx.data());
        set_amx_enabled(false);
        matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, vnni.data());
        set_amx_enabled(true);
        const size_t wrb = row_bytes(type, n_cols);
        std::vector<float> wf(n_cols);
        for (int64_t r = 0; r < n_rows; ++r) {
            dequantize_row_ref(type, w.data() + r * wrb, wf.data(), n_cols);
            for (int64_t t = 0; t < n_tok; ++t) {
                double mag = 0;
                for (int64_t i = 0; i < n_cols; ++i) mag += std::fabs(wf[i] * x[t * n_cols + i]);
                // Same integers per block, same float operations per block: only the order of
                // the per-block additions may differ.
                REQUIRE(std::fabs(amx[t * n_rows + r] - vnni[t * n_rows + r]) <= 1e-5 * mag + 1e-30);
            }
        }
    }
    set_active_path(saved);
}

TEST_CASE("matmul int8 (opt-in): single-level activations, the same on every path", "[unit]") {
    const CpuPath saved = active_path();
    std::mt19937 rng(31);
    struct Shape { DType type; int64_t n_rows, n_cols; };
    const Shape shapes[] = {{DType::Q4_0, 37, 256}, {DType::Q4_1, 16, 96}, {DType::Q8_0, 20, 64},
                            {DType::Q4_K, 33, 512}, {DType::Q6_K, 17, 256}, {DType::F16, 9, 48},
                            {DType::Q2_K, 20, 512}, {DType::Q3_K, 18, 256}, {DType::IQ4_NL, 16, 64},
                            {DType::IQ4_XS, 33, 256}, {DType::MXFP4, 19, 128}};
    for (const auto& [type, n_rows, n_cols] : shapes) {
        for (int64_t n_tok : {1, 5, 19}) {
            INFO(dtype_name(type) << " tokens " << n_tok);
            const auto w = random_weights(type, n_rows, n_cols, rng);
            std::vector<float> x(n_tok * n_cols);
            std::normal_distribution<float> normal;
            for (auto& v : x) v = normal(rng);
            // Reference: single-level activations (lo = 0); float weights are unaffected.
            const ActFormat fmt = act_format_for(type) == ActFormat::F32 ? ActFormat::F32 : ActFormat::Q8;
            const size_t wrb = row_bytes(type, n_cols);
            std::vector<uint8_t> a(act_row_bytes(type, n_cols));
            std::vector<float> want(n_tok * n_rows), wf(n_cols);
            std::vector<double> mag(n_tok * n_rows, 0.0);
            for (int64_t t = 0; t < n_tok; ++t) {
                quantize_act_ref(fmt, &x[t * n_cols], a.data(), n_cols);
                if (fmt == ActFormat::Q8) {
                    const ActQ8x2 v = act_q8x2(a.data(), n_cols);
                    for (int64_t i = 0; i < n_cols; ++i) REQUIRE(v.lo[i] == 0);
                }
                for (int64_t r = 0; r < n_rows; ++r) {
                    want[t * n_rows + r] = vec_dot_ref(type, w.data() + r * wrb, a.data(), n_cols);
                    dequantize_row_ref(type, w.data() + r * wrb, wf.data(), n_cols);
                    for (int64_t i = 0; i < n_cols; ++i) mag[t * n_rows + r] += std::fabs(wf[i] * x[t * n_cols + i]);
                }
            }
            for (CpuPath path : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512}) {
                if (!path_supported(path)) continue;
                set_active_path(path);
                std::vector<float> got(n_tok * n_rows, NAN);
                matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, got.data(), /*int8=*/true);
                for (size_t i = 0; i < got.size(); ++i) {
                    INFO("path " << path_name(path) << " i " << i);
                    REQUIRE(std::fabs(got[i] - want[i]) <= 1e-5 * mag[i] + 1e-30);
                }
            }
            set_active_path(saved);
        }
    }
}

TEST_CASE("matmul bf16 prefill (opt-in, oneDNN): the bf16-rounded product, then the reference's AMX again", "[unit]") {
    const bool saved = bf16_prefill_enabled();
    set_bf16_prefill(true);
    struct Restore {
        bool on;
        ~Restore() { set_bf16_prefill(on); }
    } restore{saved};
    if (!bf16_prefill_usable(DType::F16)) STRATA_SKIP("oneDNN does not run bf16 on AMX here (or STRATA_AMX=0)");
    std::mt19937 rng(41);
    struct Shape { DType type; int64_t n_rows, n_cols; };
    // Rows not a multiple of 16 or of the 64-row dequantization tasks; every weight family.
    const Shape shapes[] = {{DType::F32, 77, 96},    {DType::F16, 130, 200}, {DType::BF16, 65, 130}, {DType::Q4_0, 77, 544},
                            {DType::Q8_0, 33, 352},  {DType::Q4_K, 70, 512}, {DType::Q6_K, 17, 256}, {DType::Q4_1, 129, 64}};
    const int64_t n_tok = kBf16PrefillMinTokens + 3;
    ThreadPool pool(2);
    // 32 tokens: below the bf16 threshold, the int8 AMX kernels, which configure each thread's
    // tiles; oneDNN then releases the tiles of the threads it runs on (the caller's too).
    const auto wq = random_weights(DType::Q4_0, 512, 256, rng);
    std::vector<float> xq(32 * 256, 0.5f), amx_before(32 * 512, NAN), amx_after(32 * 512, NAN);
    pool.run([&] { matmul(DType::Q4_0, wq.data(), 512, 256, xq.data(), 32, amx_before.data()); });
    for (const auto& [type, n_rows, n_cols] : shapes) {
        INFO(dtype_name(type) << " " << n_rows << "x" << n_cols);
        const auto w = random_weights(type, n_rows, n_cols, rng);
        std::vector<float> x(n_tok * n_cols);
        std::normal_distribution<float> normal;
        for (auto& v : x) v = normal(rng);
        std::vector<float> y(n_tok * n_rows, NAN);
        pool.run([&] { matmul(type, w.data(), n_rows, n_cols, x.data(), n_tok, y.data()); });

        const size_t wrb = row_bytes(type, n_cols);
        std::vector<float> wf(n_cols);
        auto bf16 = [](float v) { return double(bf16_to_fp32(fp32_to_bf16(v))); };
        for (int64_t r = 0; r < n_rows; ++r) {
            dequantize_row_ref(type, w.data() + r * wrb, wf.data(), n_cols);
            for (int64_t t = 0; t < n_tok; ++t) {
                const float* xt = &x[t * n_cols];
                double exact = 0, rounded = 0, mag = 0;
                for (int64_t i = 0; i < n_cols; ++i) {
                    exact += double(wf[i]) * xt[i];
                    rounded += bf16(wf[i]) * bf16(xt[i]);
                    mag += std::fabs(double(wf[i]) * xt[i]);
                }
                const float got = y[t * n_rows + r];
                // The products of bf16-rounded values, summed in f32 (order free) ...
                REQUIRE(std::fabs(got - rounded) <= 1e-5 * mag + 1e-30);
                // ... so within two bf16 roundings (2^-8 each) of the float product.
                REQUIRE(std::fabs(got - exact) <= 1.01 * std::ldexp(mag, -7) + 1e-30);
            }
        }
        // Weights tiled at load give the same bits: the same floats dequantized from the tiles.
        auto tiled = w;
        if (tile_weights(type, tiled.data(), n_rows, n_cols)) {
            std::vector<float> y_tiled(n_tok * n_rows, NAN);
            pool.run([&] { matmul(type, tiled.data(), n_rows, n_cols, x.data(), n_tok, y_tiled.data(), false, true); });
            REQUIRE(y_tiled == y);
        }
    }
    // The int8 AMX kernels configure the tiles again instead of faulting.
    pool.run([&] { matmul(DType::Q4_0, wq.data(), 512, 256, xq.data(), 32, amx_after.data()); });
    CHECK(amx_before == amx_after);
}

// cpu/quant_ref.cpp against gguf-py (tests/fixtures/quant, made by
// tests/reference/make_quant_fixtures.py), and every SIMD path against cpu/quant_ref.cpp.
#include <immintrin.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "cpu/quant.h"
#include "cpu/quant_ref.h"
#include "tests/support/fixtures.h"
#include "tests/support/random_weights.h"
#include "tests/support/skip.h"

using namespace strata;
using namespace strata::cpu;

namespace {

std::vector<float> as_floats(const std::vector<uint8_t>& b) {
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

struct Named { const char* name; DType type; };
const Named kStoredTypes[] = {
    {"f32", DType::F32},   {"f16", DType::F16},   {"bf16", DType::BF16}, {"q4_0", DType::Q4_0},
    {"q4_1", DType::Q4_1}, {"q5_0", DType::Q5_0}, {"q5_1", DType::Q5_1}, {"q8_0", DType::Q8_0},
    {"q4_k", DType::Q4_K}, {"q5_k", DType::Q5_K}, {"q6_k", DType::Q6_K}, {"q8_k", DType::Q8_K},
    {"q2_k", DType::Q2_K}, {"q3_k", DType::Q3_K}, {"iq4_nl", DType::IQ4_NL}, {"iq4_xs", DType::IQ4_XS},
    {"mxfp4", DType::MXFP4},
};

std::vector<CpuPath> supported_paths() {
    std::vector<CpuPath> v;
    for (CpuPath p : {CpuPath::Scalar, CpuPath::Avx2, CpuPath::Avx512})
        if (path_supported(p)) v.push_back(p);
    return v;
}
struct RestorePath {  // tests switch paths; leave the one STRATA_CPU chose for the next test
    CpuPath saved = active_path();
    ~RestorePath() { set_active_path(saved); }
};

std::vector<uint8_t> random_row(DType t, int64_t n, std::mt19937& rng) { return test::random_weights(t, 1, n, rng); }

std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> normal;
    std::vector<float> x(n);
    for (auto& v : x) v = normal(rng);
    return x;
}

__attribute__((target("f16c"))) float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hw_f2h(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

}  // namespace

TEST_CASE("fp16 conversions match F16C", "[unit]") {
    if (!cpu_features().f16c) STRATA_SKIP("no F16C on this CPU");
    for (uint32_t h = 0; h < 65536; ++h) {
        const float a = fp16_to_fp32(uint16_t(h)), b = hw_h2f(uint16_t(h));
        if (std::isnan(b)) REQUIRE(std::isnan(a));
        else REQUIRE(bits(a) == bits(b));
    }
    std::mt19937 rng(7);
    std::vector<float> xs = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e9f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                             6.1035e-5f, 6.1e-5f, 1e-10f, INFINITY, -INFINITY};
    for (int i = 0; i < 200000; ++i) {
        uint32_t u = rng();
        float f;
        std::memcpy(&f, &u, 4);
        if (!std::isnan(f)) xs.push_back(f);
    }
    for (float f : xs) {
        INFO("f = " << f);
        REQUIRE(fp32_to_fp16(f) == hw_f2h(f));
    }
}

TEST_CASE("scalar dequantize matches gguf-py fixtures", "[unit]") {
    const std::string dir = "quant/";
    for (const auto& [name, type] : kStoredTypes) {
        INFO("type " << name);
        const auto raw = test::read_fixture_bytes(dir + name + ".bin");
        const auto want = as_floats(test::read_fixture_bytes(dir + name + ".f32"));
        const auto n = static_cast<int64_t>(want.size());
        REQUIRE(raw.size() == row_bytes(type, n));
        std::vector<float> got(n);
        dequantize_row_ref(type, raw.data(), got.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            INFO("value " << i);
            // Same float operations in the same order as gguf-py: equal, up to 1e-6 relative.
            REQUIRE(std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]));
        }
    }
}

TEST_CASE("every path dequantizes exactly like the reference", "[unit]") {
    RestorePath restore;
    const std::string dir = "quant/";
    std::mt19937 rng(11);
    for (CpuPath path : supported_paths()) {
        set_active_path(path);
        for (const auto& [name, type] : kStoredTypes) {
            INFO("path " << path_name(path) << " type " << name);
            const auto raw = test::read_fixture_bytes(dir + name + ".bin");
            const int64_t n = static_cast<int64_t>(raw.size() / traits(type).block_bytes * traits(type).block_elems);
            std::vector<float> want(n), got(n);
            dequantize_row_ref(type, raw.data(), want.data(), n);
            dequantize_row(type, raw.data(), got.data(), n);
            REQUIRE(std::memcmp(want.data(), got.data(), n * 4) == 0);
            if (traits(type).block_elems == 1) {  // ragged lengths exercise the masked tails
                for (int64_t m : {1, 7, 17, 37}) {
                    const auto row = random_row(type, m, rng);
                    std::vector<float> a(m), b(m);
                    dequantize_row_ref(type, row.data(), a.data(), m);
                    dequantize_row(type, row.data(), b.data(), m);
                    REQUIRE(std::memcmp(a.data(), b.data(), m * 4) == 0);
                }
            }
        }
    }
}

TEST_CASE("activation quantization: same bytes on every path, error within a 2^-16 step", "[unit]") {
    RestorePath restore;
    std::mt19937 rng(3);
    for (ActFormat fmt : {ActFormat::Q8x2, ActFormat::F32}) {
        const int64_t n = 32 * 9;
        auto x = random_floats(n, rng);
        x[5] *= 40.0f;                                          // one outlier block
        std::fill(x.begin() + 32, x.begin() + 64, 0.0f);        // an all-zero block
        std::fill(x.begin() + 64, x.begin() + 96, 1e-35f);      // a block too small to scale
        for (int j = 96; j < 128; ++j) x[j] = float(j - 112) * 0.5f;  // residuals near +-d/2
        std::vector<uint8_t> want(fmt == ActFormat::F32 ? n * 4 : act_q8x2_bytes(n));
        quantize_act_ref(fmt, x.data(), want.data(), n);
        std::vector<float> back(n);
        dequantize_act_ref(fmt, want.data(), back.data(), n);
        for (int64_t b0 = 0; b0 < n; b0 += 32) {
            float amax = 0;
            for (int64_t i = b0; i < b0 + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
            for (int64_t i = b0; i < b0 + 32; ++i) {
                INFO("value " << i);
                // hi leaves a residual within d/2 (d = amax/127); lo rounds it to d/256 steps,
                // clamped at +-127 steps: at most one step off. Tiny blocks become zeros.
                const float bound = fmt == ActFormat::F32 ? 0.0f : amax / 127.0f / 256.0f * 1.001f + 1e-30f;
                REQUIRE(std::fabs(back[i] - x[i]) <= bound);
            }
        }
        if (fmt == ActFormat::Q8x2) {  // the sums the kernels use
            const ActQ8x2 v = act_q8x2(want.data(), n);
            for (int64_t b = 0; b < n / 32; ++b) {
                int32_t s[2] = {0, 0};
                for (int j = 0; j < 32; ++j) s[j / 16] += 256 * v.hi[32 * b + j] + v.lo[32 * b + j];
                REQUIRE(v.s16[2 * b] == s[0]);
                REQUIRE(v.s16[2 * b + 1] == s[1]);
                REQUIRE(v.s32[b] == s[0] + s[1]);
                REQUIRE(v.dcs[b] == v.dc[b] * float(s[0] + s[1]));
            }
        }
        for (CpuPath path : supported_paths()) {
            set_active_path(path);
            INFO("path " << path_name(path) << " format " << int(fmt));
            std::vector<uint8_t> got(want.size());
            quantize_activations(fmt, x.data(), got.data(), n);
            REQUIRE(got == want);
        }
    }
}

namespace {

// The reference's dot and every path's of weight row w (n values of wt) with x, each against the
// exact dot of the two rows they represent.
void check_dot_on_every_path(DType wt, const std::vector<uint8_t>& w, const std::vector<float>& x, int64_t n) {
    RestorePath restore;
    const ActFormat fmt = act_format_for(wt);
    std::vector<uint8_t> a(act_row_bytes(wt, n));
    quantize_act_ref(fmt, x.data(), a.data(), n);
    std::vector<float> wf(n), af(n);
    dequantize_row_ref(wt, w.data(), wf.data(), n);
    dequantize_act_ref(fmt, a.data(), af.data(), n);

    // What the dot should give: the exact dot of the two dequantized rows. Per-block integer
    // sums are exact, so kernels differ from it only by float rounding while scaling and adding
    // block terms: a few 2^-24 of the terms' magnitude (a block's terms, d*q*a and min*a, are
    // bounded by 8 * max|w in block| * |a|).
    double exact = 0, mag = 0, qerr = 0, xdot = 0;
    for (int64_t b0 = 0; b0 < n; b0 += 32) {
        float wmax = 0, xmax = 0;
        for (int64_t i = b0; i < std::min(n, b0 + 32); ++i)
            wmax = std::max(wmax, std::fabs(wf[i])), xmax = std::max(xmax, std::fabs(x[i]));
        for (int64_t i = b0; i < std::min(n, b0 + 32); ++i) {
            exact += double(wf[i]) * af[i];
            xdot += double(wf[i]) * x[i];
            mag += 8.0 * wmax * std::fabs(af[i]);
            qerr += std::fabs(wf[i]) * (fmt == ActFormat::F32 ? 0.0 : xmax / 127.0 / 256.0 * 1.001);
        }
    }
    const double tol = double(n / 16 + 8) * 0x1p-23 * mag + 1e-30;
    INFO("type " << dtype_name(wt) << " n " << n);
    const float ref = vec_dot_ref(wt, w.data(), a.data(), n);
    CHECK(std::fabs(ref - exact) <= tol);
    // Against the float dot with the unquantized x: the activations' rounding error.
    CHECK(std::fabs(ref - xdot) <= qerr + tol);
    for (CpuPath path : supported_paths()) {
        set_active_path(path);
        INFO("path " << path_name(path));
        CHECK(std::fabs(vec_dot(wt, w.data(), a.data(), n) - exact) <= tol);
    }
}

const DType kDotTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,   DType::Q5_0,
                           DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K,   DType::Q6_K,   DType::Q8_K,
                           DType::Q2_K, DType::Q3_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

}  // namespace

TEST_CASE("vec_dot: reference and every path against the exact dot of what they represent", "[unit]") {
    std::mt19937 rng(5);
    for (DType wt : kDotTypes) {
        const int64_t be = traits(wt).block_elems;
        const std::vector<int64_t> sizes = be == 1 ? std::vector<int64_t>{1, 7, 33, 100, 1003}
                                                   : std::vector<int64_t>{be, 3 * be, 7 * be, 33 * be};
        for (int64_t n : sizes) {
            if (act_format_for(wt) == ActFormat::Q8x2 && n % 32) continue;
            check_dot_on_every_path(wt, random_row(wt, n, rng), random_floats(n, rng), n);
        }
    }
}

// Kernels sum quantized values times activations of up to 256 * 127 in integers: rows of one
// byte repeated (all values and scales at the ends of their ranges, 0x80's int8 scales -128)
// against activations all of one magnitude hold their largest sums.
TEST_CASE("vec_dot: weights and activations at the ends of their ranges, on every path", "[unit]") {
    std::mt19937 rng(6);
    for (DType wt : kDotTypes) {
        if (act_format_for(wt) != ActFormat::Q8x2) continue;
        const int64_t n = 4 * traits(wt).block_elems;
        const F16ScaleFields f16 = f16_scale_fields(wt);
        if (f16.n == 0) continue;  // Q8_K's f32 and MXFP4's exponent: a byte pattern makes no finite scale
        for (uint8_t fill : {0x00, 0x7F, 0x80, 0xFF}) {
            const auto random = random_row(wt, n, rng);  // its f16 scales finite
            std::vector<uint8_t> w(random.size(), fill);
            for (size_t b = 0; b < w.size(); b += traits(wt).block_bytes)
                for (int k = 0; k < f16.n; ++k) std::memcpy(&w[b + f16.at[k]], &random[b + f16.at[k]], 2);
            for (float sign : {1.0f, -1.0f}) {
                INFO("fill " << int(fill) << " activations " << sign);
                check_dot_on_every_path(wt, w, std::vector<float>(n, sign), n);
            }
        }
    }
}

TEST_CASE("STRATA_CPU selects a path and rejects bad names", "[unit]") {
    const char* old = std::getenv("STRATA_CPU");
    const std::string saved = old ? old : "";
    setenv("STRATA_CPU", "scalar", 1);
    CHECK(path_from_env() == CpuPath::Scalar);
    setenv("STRATA_CPU", "avx9000", 1);
    CHECK_THROWS(path_from_env());
    unsetenv("STRATA_CPU");
    CHECK(path_from_env() == best_path());
    if (old) setenv("STRATA_CPU", saved.c_str(), 1);
    CHECK(parse_cpu_path("avx512") == CpuPath::Avx512);
    CHECK(!parse_cpu_path("AVX"));
    CHECK(act_format_for(DType::Q4_K) == ActFormat::Q8x2);
    CHECK(act_format_for(DType::Q5_1) == ActFormat::Q8x2);
    CHECK(act_format_for(DType::BF16) == ActFormat::F32);
    CHECK(act_format_for(DType::IQ4_XS) == ActFormat::Q8x2);
    CHECK(act_format_for(DType::MXFP4) == ActFormat::Q8x2);
    CHECK(has_kernels(DType::Q2_K));
    CHECK_THROWS(act_format_for(DType::Q8_1));
    CHECK(!has_kernels(DType::I32));
}

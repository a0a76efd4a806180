// The attention kernels' KV element access and quantized writers (gpu/kernels/kv_blocks.h),
// compiled for the host and checked on the host against cpu/kv_format: the device kernels run
// the same functions.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "cpu/kv_format.h"
#include "gpu/kernels/kv_blocks.h"
#include "tests/support/random_values.h"

using namespace strata;
namespace blocks = strata::gpu::blocks;
using blocks::KvKind;

namespace {

template <KvKind kKind>
void check_reads(DType type) {
    INFO(dtype_name(type));
    const int64_t n = 4 * 32;
    const auto x = test::normal_floats(n, 31);
    std::vector<uint8_t> row(row_bytes(type, n));
    cpu::store_kv_row(type, x.data(), row.data(), n);
    std::vector<float> ref(n);
    cpu::load_kv_values(type, row.data(), 0, ref.data(), n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += blocks::KvElem<kKind>::one(row.data(), i) != ref[i];
    for (int64_t i = 0; i < n; i += 8) {
        float v[8];
        blocks::KvElem<kKind>::eight(row.data(), i, v);
        for (int k = 0; k < 8; ++k) bad += v[k] != ref[i + k];
    }
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("gpu KV elements on the host read what cpu::load_kv_values reads", "[unit][gpu_blocks]") {
    check_reads<KvKind::F32>(DType::F32);
    check_reads<KvKind::F16>(DType::F16);
    check_reads<KvKind::BF16>(DType::BF16);
    check_reads<KvKind::Q8_0>(DType::Q8_0);
    check_reads<KvKind::Q4_0>(DType::Q4_0);
}

TEST_CASE("gpu KV block writers on the host write cpu::store_kv_row's bytes", "[unit][gpu_blocks]") {
    const int64_t n = 5 * 32;
    auto x = test::normal_floats(n, 41);
    for (int j = 0; j < 32; ++j) x[j] = 0.0f;           // a zero block
    x[40] = 2.5f, x[41] = -2.5f;                          // Q4_0: the first of equal magnitudes
    for (int j = 64; j < 96; ++j) x[j] = float(j % 7) - 3.0f;  // ties at the rounding points
    for (const DType type : {DType::Q8_0, DType::Q4_0}) {
        INFO(dtype_name(type));
        std::vector<uint8_t> ref(row_bytes(type, n)), got(ref.size());
        cpu::store_kv_row(type, x.data(), ref.data(), n);
        for (int64_t b = 0; b < n / 32; ++b) {
            if (type == DType::Q8_0)
                blocks::store_kv_block_q8_0(x.data(), got.data(), b);
            else
                blocks::store_kv_block_q4_0(x.data(), got.data(), b);
        }
        CHECK(got == ref);
    }
}

// probe/io_rates: the bandwidth probes run and return plausible numbers (never timed here).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "probe/io_rates.h"
#include "tests/support/gguf_writer.h"

using namespace strata;
using namespace strata::probe;

TEST_CASE("sequential read and DRAM copy probes return finite positive GB/s", "[unit][storage]") {
    const auto path = test::temp_path("probe_io.bin");
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        std::vector<char> data((8u << 20) + 100, 'p');
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
    }
    const double disk = measure_sequential_read_gbps(path, uint64_t{1} << 40, 8);
    CHECK(std::isfinite(disk));
    CHECK(disk > 0);
    const double dram = measure_dram_copy_gbps(8u << 20, 2);
    CHECK(std::isfinite(dram));
    CHECK(dram > 0);
    CHECK_THROWS_AS(measure_sequential_read_gbps(test::temp_path("probe_missing.bin"), 1, 1), IoError);
}

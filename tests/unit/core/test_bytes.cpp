// core/bytes: memory sizes as users write them and as messages print them.
#include <catch2/catch.hpp>

#include "core/bytes.h"
#include "core/error.h"

using namespace strata;

TEST_CASE("memory sizes parse with binary suffixes, bytes and percentages", "[unit][core]") {
    const uint64_t ram = uint64_t{16} << 30;
    CHECK(parse_memory_size("4096", ram) == 4096);
    CHECK(parse_memory_size("0", ram) == 0);
    CHECK(parse_memory_size("512M", ram) == (uint64_t{512} << 20));
    CHECK(parse_memory_size("6G", ram) == (uint64_t{6} << 30));
    CHECK(parse_memory_size("1.5G", ram) == (uint64_t{3} << 29));
    CHECK(parse_memory_size("64k", ram) == 65536);
    CHECK(parse_memory_size("2T", ram) == (uint64_t{2} << 40));
    CHECK(parse_memory_size("512MiB", ram) == (uint64_t{512} << 20));
    CHECK(parse_memory_size("512mb", ram) == (uint64_t{512} << 20));
    CHECK(parse_memory_size("100B", ram) == 100);
    CHECK(parse_memory_size(" 8G ", ram) == (uint64_t{8} << 30));
    CHECK(parse_memory_size("40%", ram) == static_cast<uint64_t>(ram * 0.4));
    CHECK(parse_memory_size("100%", ram) == ram);
    CHECK(parse_memory_size("12.5%", ram) == ram / 8);
}

TEST_CASE("junk memory sizes are usage errors that quote the text", "[unit][core]") {
    const uint64_t ram = uint64_t{16} << 30;
    for (const char* bad : {"", "  ", "abc", "G", "12X", "-5G", "1.5", "1.2.3G", "0%", "150%", "-1%", "5 GB extra",
                            "1e9", "99999999999T", "18446744073709551616", ".G", "4096 bytes"}) {
        INFO("input '" << bad << "'");
        try {
            parse_memory_size(bad, ram);
            FAIL("accepted");
        } catch (const UsageError& e) {
            CHECK(std::string(e.what()).find(std::string("'") + bad + "'") != std::string::npos);
            CHECK(!e.hint().empty());
        }
    }
}

TEST_CASE("total RAM comes from sysconf and is plausible", "[unit][core]") {
    const uint64_t ram = system_ram_bytes();
    CHECK(ram >= (uint64_t{256} << 20));
    CHECK(parse_memory_size("50%") == ram / 2);
}

TEST_CASE("byte counts print in binary units", "[unit][core]") {
    CHECK(format_bytes(0) == "0 B");
    CHECK(format_bytes(600) == "600 B");
    CHECK(format_bytes(uint64_t{512} << 20) == "512 MiB");
    CHECK(format_bytes(uint64_t{3} << 29) == "1.5 GiB");
    CHECK(format_bytes(1536) == "1.5 KiB");
}

TEST_CASE("a size to give is rounded up, so that typed back it holds what was asked", "[unit][core]") {
    const uint64_t mib = uint64_t{1} << 20;
    CHECK(format_bytes(183 * mib + mib / 3) == "183.3 MiB");
    CHECK(format_bytes_at_least(183 * mib + mib / 3) == "183.4 MiB");
    CHECK(format_bytes_at_least(512 * mib) == "512 MiB");  // exact stays exact
    CHECK(format_bytes_at_least(600) == "600 B");
    for (const uint64_t bytes : {183 * mib + 1, 7 * mib - 1, (uint64_t{3} << 30) + 12345, uint64_t{1025}}) {
        std::string text = format_bytes_at_least(bytes);
        text.erase(text.find(' '), 1);  // "183.1MiB", as a flag takes it
        INFO(text);
        CHECK(parse_memory_size(text, 0) >= bytes);
    }
}

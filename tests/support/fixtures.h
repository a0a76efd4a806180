#pragma once
// The fixtures the Python reference recorded under tests/fixtures/.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::test {

// Parses tests/fixtures/model/<name>; throws std::runtime_error naming the file when it cannot be read.
nlohmann::json model_fixture(const std::string& name);
// The bytes of tests/fixtures/<path>; throws std::runtime_error naming the file when it cannot be read.
std::vector<uint8_t> read_fixture_bytes(const std::string& path);

}  // namespace strata::test

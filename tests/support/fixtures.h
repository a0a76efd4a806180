#pragma once
// The JSON fixtures the Python reference recorded under tests/fixtures/model/.
#include <string>

#include <nlohmann/json.hpp>

namespace strata::test {

// Parses tests/fixtures/model/<name>; throws std::runtime_error naming the file when it cannot be read.
nlohmann::json model_fixture(const std::string& name);

}  // namespace strata::test

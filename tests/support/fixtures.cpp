#include "tests/support/fixtures.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace strata::test {

nlohmann::json model_fixture(const std::string& name) {
    const std::string path = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/model/" + name;
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read the fixture " + path);
    return nlohmann::json::parse(in);
}

std::vector<uint8_t> read_fixture_bytes(const std::string& path) {
    const std::string full = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/" + path;
    std::ifstream in(full, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read the fixture " + full);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace strata::test

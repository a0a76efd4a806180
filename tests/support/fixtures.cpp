#include "tests/support/fixtures.h"

#include <fstream>
#include <stdexcept>

namespace strata::test {

nlohmann::json model_fixture(const std::string& name) {
    const std::string path = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/model/" + name;
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read the fixture " + path);
    return nlohmann::json::parse(in);
}

}  // namespace strata::test

#pragma once
// What a request reader's 400 names, for tests of the OpenAI and Ollama request readers.
#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "tools/openai/api_error.h"

namespace strata::test {

// The `param` of the 400 ApiError `f` throws; fails the test when it throws none.
inline std::string param_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const openai::ApiError& e) {
        CHECK(e.status() == 400);
        return e.param();
    }
    FAIL("no error");
    return {};
}

}  // namespace strata::test

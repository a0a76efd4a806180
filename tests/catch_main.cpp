// The test runner: Catch's own, with a listener that counts the cases run and skipped so a
// process whose every case skipped exits with the code ctest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/support/gguf_writer.h"
#include "tests/support/skip.h"

namespace {

int g_cases_run = 0;
int g_cases_skipped = 0;
bool g_current_skipped = false;

struct SkipCounter : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseStarting(const Catch::TestCaseInfo&) override {
        ++g_cases_run;
        g_current_skipped = false;
    }
    void testCaseEnded(const Catch::TestCaseStats&) override { g_cases_skipped += g_current_skipped; }
};

}  // namespace

CATCH_REGISTER_LISTENER(SkipCounter)

namespace strata::test {

void mark_skipped() { g_current_skipped = true; }

int exit_code(int catch_result) {
    if (catch_result == 0 && g_cases_run > 0 && g_cases_skipped == g_cases_run) return kSkipExitCode;
    return catch_result;
}

}  // namespace strata::test

int main(int argc, char* argv[]) {
    const int result = Catch::Session().run(argc, argv);
    // Each process's test files (models written for a case) would otherwise pile up run after run.
    if (result == 0) strata::test::remove_temp_files();
    return strata::test::exit_code(result);
}

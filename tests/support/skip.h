#pragma once
// Tests that cannot run here (no GPU, no AMX, no model file, no tmpfs) say so with
// STRATA_SKIP: the case returns with the reason shown, and a test process in which every case
// that ran skipped exits with kSkipExitCode, which ctest reports as skipped, never as passed
// (ctest runs one case per process; tests/CMakeLists.txt sets SKIP_RETURN_CODE).
#include <catch2/catch.hpp>

#include <string>

namespace strata::test {

inline constexpr int kSkipExitCode = 77;

// Marks the running test case skipped (called by STRATA_SKIP).
void mark_skipped();
// The process's exit code once Catch has run: kSkipExitCode when no case failed and every
// case that ran was skipped, else Catch's own.
int exit_code(int catch_result);

}  // namespace strata::test

#define STRATA_SKIP(reason)                  \
    do {                                     \
        WARN("skipped: " << reason);         \
        ::strata::test::mark_skipped();      \
        return;                              \
    } while (0)

// A part of a case that cannot run here (io_uring, AVX-512, O_DIRECT): the rest of the case runs
// and its failures count, but the case is reported skipped, not passed.
#define STRATA_SKIP_PART(reason)             \
    do {                                     \
        WARN("skipped: " << reason);         \
        ::strata::test::mark_skipped();      \
    } while (0)

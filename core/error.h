#pragma once
// Error types thrown for load, config, I/O and user-input failures. They are caught once,
// at the CLI/server edge, and printed as one line: what went wrong, then how to fix it.
#include <stdexcept>
#include <string>

namespace strata {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what, std::string hint = {})
        : std::runtime_error(what), hint_(std::move(hint)) {}
    const std::string& hint() const { return hint_; }

private:
    std::string hint_;
};

// Malformed or unsupported model file content.
class FormatError : public Error { using Error::Error; };
// Operating-system level I/O failure (open, read, mmap, disk full).
class IoError : public Error { using Error::Error; };
// A request the user made that cannot be satisfied (bad flag, prompt too long, ...).
class UsageError : public Error { using Error::Error; };
// A memory budget too small for what was asked.
class OutOfBudget : public Error { using Error::Error; };
// The device's memory could not hold an allocation (its pool full, or memory taken away): the
// device backend answers it by moving layers to the CPU.
class DeviceOutOfMemory : public OutOfBudget { using OutOfBudget::OutOfBudget; };
// A compute backend failed (CUDA error, missing device).
class BackendError : public Error { using Error::Error; };

}  // namespace strata

// Invariant check that stays on in release builds; failures are programming errors.
#define STRATA_ASSERT(cond)                                                                   \
    do {                                                                                      \
        if (!(cond)) ::strata::assert_fail(#cond, __FILE__, __LINE__);                        \
    } while (0)

namespace strata {
[[noreturn]] void assert_fail(const char* cond, const char* file, int line);
}

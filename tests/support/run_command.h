#pragma once
// Runs a shell command for end-to-end tests of the `strata` binary.
#include <string>

namespace strata::test {

struct CommandResult {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

CommandResult run_command(const std::string& command);
// `strata <args>` from this build, with the model cache pointed at `models_dir` when given.
CommandResult run_strata(const std::string& args, const std::string& models_dir = {});

}  // namespace strata::test

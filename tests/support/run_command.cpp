#include "tests/support/run_command.h"

#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tests/support/gguf_writer.h"
#include "tests/support/model_paths.h"

namespace strata::test {

namespace {
std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}
}  // namespace

CommandResult run_command(const std::string& command) {
    static std::atomic<int> counter{0};
    const int id = counter++;
    auto out = temp_path("cmd" + std::to_string(id) + ".out"), err = temp_path("cmd" + std::to_string(id) + ".err");
    const std::string full = "(" + command + ") >" + out.string() + " 2>" + err.string() + " </dev/null";
    const int status = std::system(full.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

CommandResult run_strata(const std::string& args, const std::string& models_dir) {
    std::string env = models_dir.empty() ? "" : "STRATA_MODELS='" + models_dir + "' ";
    return run_command(env + strata_binary().string() + " " + args);
}

}  // namespace strata::test

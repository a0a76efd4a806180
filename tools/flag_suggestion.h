#pragma once
// A mistyped flag's nearest spelling among a command's flags, for the error that refuses it.
#include <string>
#include <string_view>

namespace CLI { class App; }

namespace strata::cli {

// The flag of `cmd` nearest `typed` (`--tmep` or `--max_batch`, a value after `=` ignored): at
// most two edits away, a swap of neighbours counting as one; empty when none is that close.
std::string nearest_flag(const CLI::App& cmd, std::string_view typed);

}  // namespace strata::cli

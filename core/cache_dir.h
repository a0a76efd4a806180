#pragma once
#include <filesystem>

namespace strata {

// $XDG_CACHE_HOME/strata, else ~/.cache/strata: where the default model, the probed hardware
// profile and the KV spill file live unless told otherwise.
std::filesystem::path cache_dir();

}  // namespace strata

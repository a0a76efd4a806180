#pragma once
// Durations as Ollama takes them for keep_alive (and `strata serve --keep-alive`): Go's
// duration text ("5m", "1h30m", "90s", "-1m") or a number of seconds; a negative one means
// "for ever", zero "unload once answered".
#include <chrono>
#include <string_view>

namespace strata::ollama {

// Throws UsageError naming the text when it is neither.
std::chrono::seconds parse_duration(std::string_view text);
// Seconds; fractions are rounded to the nearest second.
std::chrono::seconds seconds_duration(double seconds);

}  // namespace strata::ollama

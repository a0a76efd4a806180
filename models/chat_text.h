#pragma once
// Text operations the chat templates call, as Python (Jinja) does them: str.strip() and the
// trim filter (Unicode whitespace: U+00A0, U+3000, ... as well as ASCII), strip(chars) with
// given characters, and today's date as strftime writes it.
#include <string>
#include <string_view>

namespace strata::models {

// Python's str.strip(), lstrip() and rstrip() without arguments: Unicode whitespace.
std::string_view py_strip(std::string_view s);
std::string_view py_lstrip(std::string_view s);
std::string_view py_rstrip(std::string_view s);
// Python's strip(chars) family, for ASCII `chars`.
std::string_view strip_chars(std::string_view s, std::string_view chars);
std::string_view lstrip_chars(std::string_view s, std::string_view chars);
std::string_view rstrip_chars(std::string_view s, std::string_view chars);

// The local date now in strftime's `format` ("%Y-%m-%d", "%d %b %Y").
std::string local_date(const char* format);

}  // namespace strata::models

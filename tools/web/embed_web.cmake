# Writes the web page's files into one C++ source: each file of FILES under /static/<name>,
# and the Debian JavaScript libraries of VENDOR_JS (Markdown, sanitiser, highlighter) joined
# into /static/vendor.js and VENDOR_CSS into /static/vendor.css. Without them (VENDOR_JS
# empty) vendor.js says so and the page shows replies as escaped plain text. KATEX_JS (math,
# loaded by the page when a reply has some) becomes /static/katex.js and each of FONTS (its
# fonts, binary) /static/fonts/<name>; without them katex.js says so and math stays TeX.
function(_strata_literal out_var text)
  # A raw string literal cannot hold its closing delimiter; none of these files do.
  string(FIND "${text}" ")strata_web\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "embed_web.cmake: a file holds the raw string delimiter")
  endif()
  set(${out_var} "R\"strata_web(${text})strata_web\"" PARENT_SCOPE)
endfunction()

function(_strata_read_stripped out_var path)
  file(READ ${path} _text)
  # Source maps are not embedded: a reference to one would be a request that fails.
  string(REGEX REPLACE "//# sourceMappingURL=[^\n]*" "" _text "${_text}")
  # bookworm's DOMPurify 2.4.1+dfsg+deb12u1 backported the nesting-depth fix with one check in
  # sanitize() that names `shadowNode`, a variable of _sanitizeShadowDOM: every sanitize() call
  # throws a ReferenceError. Upstream (2.5.4) has no such check there; the per-node depth check
  # the update added to sanitize()'s loop stays.
  string(REPLACE "if (shadowNode.__depth >= MAX_NESTING_DEPTH || numberIsNaN(shadowNode.__depth)) {"
                 "if (false) { // stray check removed by tools/web/embed_web.cmake" _text "${_text}")
  # KaTeX's fonts are embedded as WOFF2 only, which every browser the page supports reads:
  # the WOFF and TrueType alternatives would name files that are not there.
  string(REGEX REPLACE ",url\\(fonts/[^)]*\\.(woff|ttf)\\) format\\('[a-z]+'\\)" "" _text "${_text}")
  set(${out_var} "${_text}" PARENT_SCOPE)
endfunction()

set(_entries "")
foreach(_in IN LISTS FILES)
  get_filename_component(_name ${_in} NAME)
  file(READ ${_in} _text)
  _strata_literal(_lit "${_text}")
  string(APPEND _entries "    {\"/static/${_name}\", ${_lit}},\n")
endforeach()

set(_js "")
foreach(_in IN LISTS VENDOR_JS)
  _strata_read_stripped(_text ${_in})
  string(APPEND _js "${_text}\n;\n")
endforeach()
if(_js STREQUAL "")
  set(_js "// Built without libjs-marked, node-dompurify and libjs-highlight.js: replies are shown as plain text.\n")
endif()
set(_css "")
foreach(_in IN LISTS VENDOR_CSS)
  _strata_read_stripped(_text ${_in})
  string(APPEND _css "${_text}\n")
endforeach()
foreach(_pair "vendor.js;_js" "vendor.css;_css")
  list(GET _pair 0 _name)
  list(GET _pair 1 _var)
  _strata_literal(_lit "${${_var}}")
  string(APPEND _entries "    {\"/static/${_name}\", ${_lit}},\n")
endforeach()

if(KATEX_JS)
  _strata_read_stripped(_text ${KATEX_JS})
else()
  set(_text "// Built without libjs-katex: math in replies is shown as TeX.\n")
endif()
_strata_literal(_lit "${_text}")
string(APPEND _entries "    {\"/static/katex.js\", ${_lit}},\n")

# Binary files as escaped bytes with their length (they may hold NULs).
foreach(_in IN LISTS FONTS)
  get_filename_component(_name ${_in} NAME)
  file(READ ${_in} _hex HEX)
  file(SIZE ${_in} _size)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" _bytes "${_hex}")
  string(APPEND _entries "    {\"/static/fonts/${_name}\", std::string_view(\"${_bytes}\", ${_size})},\n")
endforeach()

file(WRITE ${OUT} "// Generated from tools/web/ and the Debian JavaScript libraries by embed_web.cmake. Do not edit.
#include \"tools/server/web_assets.h\"
namespace strata::server {
const WebFile kWebFiles[] = {
${_entries}};
std::span<const WebFile> web_files() { return kWebFiles; }
}  // namespace strata::server
")

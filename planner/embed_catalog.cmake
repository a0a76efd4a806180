# Writes the catalog JSON files into one C++ source as raw string literals, one
# `std::string_view` per file, named after the file (hardware.json → kCatalog_hardware).
set(_out "// Generated from planner/catalog/*.json by embed_catalog.cmake. Do not edit.\n#include <string_view>\nnamespace strata::planner::catalog_data {\n")
foreach(_in IN LISTS INPUTS)
  get_filename_component(_stem ${_in} NAME_WE)
  file(READ ${_in} _text)
  string(APPEND _out "extern const std::string_view kCatalog_${_stem};\nconst std::string_view kCatalog_${_stem} = R\"strata_json(${_text})strata_json\";\n")
endforeach()
string(APPEND _out "}  // namespace strata::planner::catalog_data\n")
file(WRITE ${OUT} "${_out}")

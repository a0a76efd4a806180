#pragma once
// The web page's files, compiled in (tools/web/ by tools/web/embed_web.cmake): the page
// needs nothing from disk or another host.
#include <span>
#include <string_view>

namespace strata::server {

struct WebFile {
    std::string_view path;  // "/static/chat.js"
    std::string_view body;
};

std::span<const WebFile> web_files();

}  // namespace strata::server

// tools/chat/reply_printer: what `strata chat` prints of a reply, pushed in pieces: on a terminal
// a reasoning model's reasoning dimmed apart from its answer, control characters shown inert; in
// a pipe, and for a model that does not reason, the text as written.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "tools/chat/reply_printer.h"

using namespace strata;
using strata::cli::ReplyPrinter;

namespace {

std::string printed(models::ChatFamily family, bool terminal, const std::string& reply, size_t piece) {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    ReplyPrinter p(models::ChatTemplate(family), terminal, f);
    for (size_t at = 0; at < reply.size(); at += piece) p.write(std::string_view(reply).substr(at, piece));
    p.finish();
    std::string out(static_cast<size_t>(std::ftell(f)), '\0');
    std::rewind(f);
    out.resize(std::fread(out.data(), 1, out.size(), f));
    std::fclose(f);
    return out;
}

}  // namespace

TEST_CASE("chat prints a reasoning model's reasoning dimmed apart from its answer on a terminal, as written in a pipe",
          "[unit][chat]") {
    const std::string qwen3 = "<think>\nCount.\n</think>\n\nFour.";
    const std::string harmony = "<|channel|>analysis<|message|>Count.<|end|><|start|>assistant<|channel|>final<|message|>Four.";
    for (size_t piece : {1, 5, 100}) {
        INFO("pieces of " << piece);
        CHECK(printed(models::ChatFamily::Qwen3, true, qwen3, piece) == "\x1b[2mCount.\x1b[0m\n\nFour.");
        CHECK(printed(models::ChatFamily::Harmony, true, harmony, piece) == "\x1b[2mCount.\x1b[0m\n\nFour.");
        CHECK(printed(models::ChatFamily::Qwen3, false, qwen3, piece) == qwen3);
        CHECK(printed(models::ChatFamily::ChatML, true, qwen3, piece) == qwen3);  // not a reasoning family
    }
    // What the model writes never drives the terminal, reasoning or answer.
    const std::string escape = "<think>\x1b[31m</think>\n\nok\x1b[2J";
    const std::string shown = printed(models::ChatFamily::Qwen3, true, escape, 3);
    CHECK(shown.find("\x1b[31m") == std::string::npos);
    CHECK(shown.find("\x1b[2J") == std::string::npos);
}

#pragma once
// A chat reply as `strata chat` prints it while it is written: on a terminal a reasoning model's
// reasoning dimmed, then a blank line and its answer (harmony's channel markup left out); in a
// pipe the text as the model wrote it. A terminal shows control characters, never obeys them.
#include <cstdio>
#include <optional>
#include <string_view>

#include "models/chat_reasoning.h"
#include "models/chat_template.h"

namespace strata::cli {

class ReplyPrinter {
public:
    // `terminal`: `out` is one.
    ReplyPrinter(const models::ChatTemplate& tmpl, bool terminal, std::FILE* out = stdout);
    void write(std::string_view text);
    // The reply is over (or stopped): what the reasoning's reading held back.
    void finish();

private:
    void show(const models::ReasoningParts& parts);
    void put(std::string_view text, bool ours = false) const;

    bool terminal_;
    std::FILE* out_;
    std::optional<models::ReasoningSplit> split_;
    bool reasoned_ = false, answered_ = false;
    bool dimmed_ = false;  // the terminal is drawing dim text
};

}  // namespace strata::cli

#include "tools/chat/reply_printer.h"

#include <cstdio>
#include <string>

#include "tools/terminal_text.h"

namespace strata::cli {

namespace {
constexpr std::string_view kDim = "\x1b[2m", kPlain = "\x1b[0m";
}

ReplyPrinter::ReplyPrinter(const models::ChatTemplate& tmpl, bool terminal, std::FILE* out) : terminal_(terminal), out_(out) {
    if (!terminal) return;
    if (const auto style = models::reasoning_style(tmpl)) split_.emplace(*style);
}

void ReplyPrinter::write(std::string_view text) {
    if (split_) return show(split_->push(text));
    put(text);
}

void ReplyPrinter::finish() {
    if (split_) show(split_->finish());
    if (dimmed_) put(kPlain, true), dimmed_ = false;
}

void ReplyPrinter::show(const models::ReasoningParts& parts) {
    if (!parts.reasoning.empty()) {
        if (!dimmed_) put(kDim, true), dimmed_ = true;
        put(parts.reasoning);
        reasoned_ = true;
    }
    if (parts.content.empty()) return;
    if (dimmed_) put(kPlain, true), dimmed_ = false;
    if (reasoned_ && !answered_) put("\n\n", true);
    answered_ = true;
    put(parts.content);
}

void ReplyPrinter::put(std::string_view text, bool ours) const {
    const std::string shown = terminal_ && !ours ? terminal_safe(text) : std::string(text);
    std::fwrite(shown.data(), 1, shown.size(), out_);
    std::fflush(out_);
}

}  // namespace strata::cli

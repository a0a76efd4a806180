#pragma once
// What one sequence's sampler holds to keep its output inside a grammar. The sampler draws a
// token as usual and asks allows(): a check of that token's bytes, which is nearly always all
// it costs. Only when the draw is refused does it mask the logits (every allowed token, from the
// vocabulary trie) and draw again, which gives the distribution restricted to the allowed tokens
// (llama.cpp's sampler does the same). Masks are cached by grammar state: the states inside a
// string or a number recur token after token.
//
// A lazy constraint (triggers given) lets the output run free until it writes one of the
// triggers (a tool call's opening tag), then holds everything from the trigger on to the
// grammar, whose sentences start with a trigger.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/grammar/token_trie.h"

namespace strata::runtime {

class GrammarConstraint {
public:
    // `triggers_from`: where in the output so far a trigger may start (after a reasoning model's
    // reasoning), npos while none may; empty: anywhere.
    GrammarConstraint(std::shared_ptr<const Grammar> grammar, const TokenTrie& vocab, std::vector<std::string> triggers = {},
                      std::function<size_t(std::string_view)> triggers_from = {});

    // Holding the output to the grammar (always, unless lazy and no trigger written yet).
    bool active() const { return matcher_.has_value(); }
    bool allows(int32_t token) const;
    // Sets the logits of the tokens not allowed to -infinity; false when none is allowed.
    bool mask(std::span<float> logits);
    // A token the sequence generated.
    void accept(int32_t token);

private:
    // Whether `piece` is whitespace after a complete sentence, after which the sentence is
    // complete and can take nothing but more whitespace: it ends nothing the end of the text does
    // not, so it is refused (a JSON value is not followed by spaces up to max_tokens). Whitespace
    // before more text (a grammar's next item, free text's next line) stays allowed.
    bool trailing_space(const std::string& piece) const;
    // Where the first trigger starts in `text`, if it holds one.
    std::optional<size_t> find_trigger(std::string_view text) const;
    const std::vector<uint8_t>& allowed_now();

    std::shared_ptr<const Grammar> grammar_;
    const TokenTrie& vocab_;
    std::vector<std::string> triggers_;
    std::function<size_t(std::string_view)> triggers_from_;
    std::string text_;  // the output so far, while waiting for a trigger
    std::optional<GrammarMatcher> matcher_;

    struct CachedMask {
        std::vector<uint32_t> key;  // the state: stack node ids, then the partial UTF-8 sequence
        std::vector<uint8_t> allowed;
        uint64_t last_used = 0;
    };
    static constexpr size_t kCachedMasks = 16;
    std::vector<CachedMask> cache_;
    uint64_t clock_ = 0;
    std::vector<uint8_t> scratch_;
};

}  // namespace strata::runtime

#pragma once
// Whether a grammar's language holds a text: all of it accepted and nothing more needed.
#include <memory>
#include <string_view>

#include "runtime/grammar/gbnf.h"
#include "runtime/grammar/grammar_matcher.h"

namespace strata::test {

inline bool grammar_accepts(const std::shared_ptr<const runtime::Grammar>& g, std::string_view text) {
    runtime::GrammarMatcher m(g);
    return m.accept(text) && m.complete();
}

inline bool grammar_accepts(std::string_view gbnf, std::string_view text) {
    return grammar_accepts(std::make_shared<const runtime::Grammar>(runtime::parse_gbnf(gbnf)), text);
}

}  // namespace strata::test

#include "tools/flag_suggestion.h"

#include <algorithm>
#include <vector>

#include <CLI/CLI.hpp>

namespace strata::cli {

namespace {

// Edits (insert, delete, replace, swap of neighbours) from a to b: the optimal string alignment distance.
size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
        for (size_t j = 1; j <= b.size(); ++j) {
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[a.size()][b.size()];
}

}  // namespace

std::string nearest_flag(const CLI::App& cmd, std::string_view typed) {
    std::string name(typed.substr(0, typed.find('=')));
    name.erase(0, name.find_first_not_of('-'));
    std::replace(name.begin(), name.end(), '_', '-');
    if (name.empty()) return {};
    std::string best;
    size_t best_distance = (name.size() < 4 ? 1 : 2) + 1;  // past the most allowed
    for (const CLI::Option* opt : cmd.get_options())
        for (const std::string& l : opt->get_lnames())
            if (const size_t d = edit_distance(name, l); d < best_distance) best = "--" + l, best_distance = d;
    return best;
}

}  // namespace strata::cli

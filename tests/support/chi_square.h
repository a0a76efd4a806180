#pragma once
// Pearson's chi-square for tests that check a sampler's distribution: the statistic of observed
// counts against expected ones, and the value it stays under with probability 1 - 0.001 when the
// distribution is right (Wilson-Hilferty's approximation of the quantile).
#include <cmath>
#include <map>
#include <vector>

namespace strata::test {

struct ChiSquare {
    double stat = 0;
    int df = 0;
    // The 99.9% quantile of chi-square with df degrees of freedom.
    double bound() const {
        const double k = df, z = 3.0902;
        return k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
    }
};

// Counts against expected counts (those below 5 pooled into one cell).
inline ChiSquare chi_square(const std::vector<double>& observed, const std::vector<double>& expected) {
    ChiSquare c;
    double o_rest = 0, e_rest = 0;
    for (size_t i = 0; i < observed.size(); ++i) {
        if (expected[i] < 5) {
            o_rest += observed[i], e_rest += expected[i];
            continue;
        }
        c.stat += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
        ++c.df;
    }
    if (e_rest > 0) c.stat += (o_rest - e_rest) * (o_rest - e_rest) / e_rest, ++c.df;
    --c.df;
    return c;
}

// Two samples of categories: are they drawn from one distribution? (a contingency table of two
// rows; categories seen fewer than 10 times in both together pooled into one).
template <class K>
ChiSquare chi_square_two_samples(const std::map<K, int>& a, const std::map<K, int>& b) {
    std::map<K, std::pair<double, double>> cells;
    for (const auto& [k, n] : a) cells[k].first += n;
    for (const auto& [k, n] : b) cells[k].second += n;
    std::vector<std::pair<double, double>> kept;
    std::pair<double, double> rest{0, 0};
    double na = 0, nb = 0;
    for (const auto& [k, c] : cells) {
        na += c.first, nb += c.second;
        if (c.first + c.second < 10) {
            rest.first += c.first, rest.second += c.second;
            continue;
        }
        kept.push_back(c);
    }
    if (rest.first + rest.second > 0) kept.push_back(rest);
    ChiSquare r;
    const double n = na + nb;
    for (const auto& [x, y] : kept) {
        const double t = x + y, ex = t * na / n, ey = t * nb / n;
        r.stat += (x - ex) * (x - ex) / ex + (y - ey) * (y - ey) / ey;
    }
    r.df = static_cast<int>(kept.size()) - 1;
    return r;
}

}  // namespace strata::test

#include "planner/routing_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "core/cache_dir.h"
#include "planner/json_util.h"

namespace strata::planner {

using json_util::get;
using json_util::json;

namespace {
// Caches whose shares differ by less than this are one size.
constexpr double kSameShare = 0.005;
}  // namespace

std::string RoutingProfile::to_json() const {
    json seen = json::array();
    for (const CacheObservation& o : cache) seen.push_back({{"share", o.share}, {"hits", o.hits}, {"choices", o.choices}});
    return json{{"strata_routing", 1}, {"model", model}, {"model_bytes", model_bytes}, {"tokens", tokens},
                {"counts", counts}, {"cache", seen}}
        .dump();
}

RoutingProfile RoutingProfile::from_json(const std::string& text) {
    const json j = json_util::parse(text, "routing statistics");
    if (!j.is_object() || json_util::get_or<int>(j, "routing", "strata_routing", 0) != 1)
        throw UsageError("the file is not Strata routing statistics (no 'strata_routing': 1)");
    RoutingProfile r;
    r.model = get<std::string>(j, "routing", "model");
    r.model_bytes = get<uint64_t>(j, "routing", "model_bytes");
    r.tokens = get<uint64_t>(j, "routing", "tokens");
    r.counts = get<std::vector<std::vector<uint64_t>>>(j, "routing", "counts");
    if (j.contains("cache"))
        for (const json& o : get<std::vector<json>>(j, "routing", "cache")) {
            const CacheObservation c{get<double>(o, "routing.cache", "share"), get<uint64_t>(o, "routing.cache", "hits"),
                                     get<uint64_t>(o, "routing.cache", "choices")};
            if (!(c.share > 0 && c.share <= 1) || c.hits > c.choices)
                throw UsageError(fmt::format("routing.cache: share {} or hits {} of {} out of range", c.share, c.hits, c.choices));
            r.observe(c);
        }
    return r;
}

void RoutingProfile::observe(const CacheObservation& o) {
    if (o.choices == 0) return;
    auto at = std::find_if(cache.begin(), cache.end(), [&](const CacheObservation& c) { return c.share > o.share - kSameShare; });
    if (at != cache.end() && at->share < o.share + kSameShare) {
        at->hits += o.hits;
        at->choices += o.choices;
    } else {
        cache.insert(at, o);
    }
}

std::optional<double> RoutingProfile::observed_hit_rate(double share) const {
    if (cache.empty()) return std::nullopt;
    double s0 = 0, h0 = 0;  // an empty cache hits nothing; one holding every expert, everything
    for (size_t i = 0; i <= cache.size(); ++i) {
        const double s1 = i < cache.size() ? cache[i].share : 1.0;
        const double h1 = i < cache.size() ? double(cache[i].hits) / double(cache[i].choices) : 1.0;
        if (share <= s1) return s1 > s0 ? h0 + (h1 - h0) * (share - s0) / (s1 - s0) : h1;
        s0 = s1;
        h0 = h1;
    }
    return 1.0;
}

void RoutingProfile::add(const RoutingProfile& o) {
    tokens += o.tokens;
    for (const CacheObservation& c : o.cache) observe(c);
    if (counts.empty()) counts.assign(o.counts.size(), std::vector<uint64_t>(o.counts.empty() ? 0 : o.counts[0].size(), 0));
    for (size_t il = 0; il < counts.size() && il < o.counts.size(); ++il)
        for (size_t e = 0; e < counts[il].size() && e < o.counts[il].size(); ++e) counts[il][e] += o.counts[il][e];
}

std::filesystem::path routing_path_beside(const std::filesystem::path& model) {
    std::filesystem::path p = model;
    return p.replace_extension(".routing.json");
}

std::filesystem::path routing_path_in_cache(const std::filesystem::path& model) {
    return cache_dir() / "routing" / routing_path_beside(model).filename();
}

namespace {

std::optional<std::string> read_text(const std::filesystem::path& p) {
    std::ifstream in(p);
    if (!in) return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The file at `p` when it holds statistics of this shape and file size.
std::optional<RoutingProfile> read_matching(const std::filesystem::path& p, uint64_t model_bytes, int n_layer,
                                            int n_expert, std::string& why_not) {
    const auto text = read_text(p);
    if (!text) return std::nullopt;
    RoutingProfile r;
    try {
        r = RoutingProfile::from_json(*text);
    } catch (const Error& e) {
        why_not = fmt::format("{} is unreadable: {}", p.string(), e.what());
        return std::nullopt;
    }
    bool shape = static_cast<int>(r.counts.size()) == n_layer;
    for (const auto& l : r.counts) shape &= static_cast<int>(l.size()) == n_expert;
    if (!shape || r.model_bytes != model_bytes) {
        why_not = fmt::format("{} is for another model file", p.string());
        return std::nullopt;
    }
    r.path = p;
    return r;
}

}  // namespace

std::optional<RoutingProfile> load_routing_profile(const std::filesystem::path& model, uint64_t model_bytes,
                                                   int n_layer, int n_expert, std::string* why_not) {
    std::string why = fmt::format("no routing statistics at {} or {}", routing_path_beside(model).string(),
                                  routing_path_in_cache(model).string());
    for (const auto& p : {routing_path_beside(model), routing_path_in_cache(model)})
        if (auto r = read_matching(p, model_bytes, n_layer, n_expert, why)) return r;
    if (why_not) *why_not = why;
    return std::nullopt;
}

std::filesystem::path save_routing_profile(const std::filesystem::path& model, RoutingProfile run) {
    std::string last_error;
    for (const auto& p : {routing_path_beside(model), routing_path_in_cache(model)}) {
        std::string ignored;
        RoutingProfile total = read_matching(p, run.model_bytes, static_cast<int>(run.counts.size()),
                                             run.counts.empty() ? 0 : static_cast<int>(run.counts[0].size()), ignored)
                                   .value_or(RoutingProfile{});
        total.model = run.model;
        total.model_bytes = run.model_bytes;
        total.add(run);
        std::error_code ec;
        std::filesystem::create_directories(p.parent_path(), ec);
        // Written whole, then renamed over the old file: a reader never sees half of it.
        const std::filesystem::path tmp = p.string() + fmt::format(".tmp{}", ::getpid());
        {
            std::ofstream out(tmp, std::ios::trunc);
            out << total.to_json();
            if (!out) {
                last_error = fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno));
                std::filesystem::remove(tmp, ec);
                continue;
            }
        }
        std::filesystem::rename(tmp, p, ec);
        if (!ec) return p;
        last_error = fmt::format("cannot rename {}: {}", tmp.string(), ec.message());
        std::filesystem::remove(tmp, ec);
    }
    throw IoError(fmt::format("routing statistics not saved: {}", last_error),
                  "make the model's folder or the cache folder ($XDG_CACHE_HOME/strata) writable");
}

}  // namespace strata::planner

#pragma once
// How often the router of each layer of a mixture of experts chose each expert, saved between
// runs so that the next plan places and caches the experts by it. `strata bench`, `serve` and
// `batch` add their counts to the file beside the model (MODEL.gguf -> MODEL.routing.json),
// or, when the model's folder is not writable, to the cache folder's routing/ under the
// model's file name; the planner reads whichever exists, beside the model first.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace strata::planner {

// What an expert cache holding `share` of the offloaded experts found in decode steps: the
// hit rate routing gives a cache of that size, locality from token to token included, which
// counts alone cannot tell.
struct CacheObservation {
    double share = 0;  // slots / offloaded experts
    uint64_t hits = 0, choices = 0;
};

struct RoutingProfile {
    std::string model;     // the model file's name
    uint64_t model_bytes = 0;  // its size: a file of another model's statistics is not used
    uint64_t tokens = 0;   // tokens routed (each layer chose n_expert_used experts for each)
    std::vector<std::vector<uint64_t>> counts;  // [layer][expert]
    std::vector<CacheObservation> cache;  // by share, ascending; caches of one share merged
    std::filesystem::path path;  // where it was read from or written to

    // The decode hit rate of a cache holding `share` of the experts, interpolated between the
    // observed shares (and 0 at share 0, 1 at share 1); nullopt without observations.
    std::optional<double> observed_hit_rate(double share) const;
    // Merges an observation into `cache`.
    void observe(const CacheObservation& o);
    std::string to_json() const;
    // Throws UsageError naming what is malformed.
    static RoutingProfile from_json(const std::string& text);
    // Adds another run's counts (same shape).
    void add(const RoutingProfile& other);
};

// MODEL.routing.json beside the model, and its place in the cache folder.
std::filesystem::path routing_path_beside(const std::filesystem::path& model);
std::filesystem::path routing_path_in_cache(const std::filesystem::path& model);

// The saved statistics of this model (n_layer x n_expert, recorded for a file of model_bytes),
// beside it or in the cache; nullopt when there are none or they are for another file or
// shape. `why_not` then says which (for the plan's "uniform routing" line).
std::optional<RoutingProfile> load_routing_profile(const std::filesystem::path& model, uint64_t model_bytes,
                                                   int n_layer, int n_expert, std::string* why_not = nullptr);

// Adds `run` to the saved statistics (beside the model, else in the cache folder) and returns
// the path written. Throws IoError when neither place is writable.
std::filesystem::path save_routing_profile(const std::filesystem::path& model, RoutingProfile run);

}  // namespace strata::planner

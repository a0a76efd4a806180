#pragma once
// Ollama's answers: what /api/chat and /api/generate send (whole, or as newline-delimited JSON
// items while the reply is written, the last one `done` with the timings in nanoseconds), the
// model listings of /api/tags, /api/show and /api/ps, and the vectors of /api/embed and
// /api/embeddings. Tool calls carry their arguments as objects, as Ollama's do.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "models/chat_tools.h"
#include "models/model_dir.h"
#include "runtime/engine.h"
#include "tools/openai/json_fields.h"

namespace strata::models {
class GgufFile;
}

namespace strata::ollama {

using openai::Json;

enum class Api { Chat, Generate };

// RFC 3339 in UTC with nanoseconds, as Ollama writes times: now, or `unix_seconds`.
std::string timestamp(std::optional<int64_t> unix_seconds = {});

// A piece of the reply: {"model", "created_at", "message": {"role", "content", "thinking", "tool_calls"}, "done": false}
// for chat, {"model", "created_at", "response", "thinking", "done": false} for generate ("thinking":
// the model's reasoning apart from its answer, where it has some).
Json item_json(Api api, const std::string& model, std::string_view text, std::span<const models::ChatToolCall> calls = {},
               std::string_view thinking = {});

// How long a reply took, for the last item.
struct Timings {
    double total_seconds = 0;  // from arrival to the end
    double load_seconds = 0;   // loading the model for this request
};
// The last item (or the whole answer, with the reply's text and calls): done, done_reason
// ("stop", "length"), the durations in nanoseconds and the token counts.
Json done_json(Api api, const std::string& model, const runtime::GenerateResult& r, const Timings& t, std::string_view text = {},
               std::span<const models::ChatToolCall> calls = {}, std::string_view thinking = {});
// A request without messages or prompt: the model was loaded ("load") or will be unloaded ("unload").
Json load_json(Api api, const std::string& model, bool unloading);

// Identifies a file's version (its path, size and time), not its bytes: hashing gigabytes for a listing would be slow.
std::string digest(const models::LocalModel& m);
// {"parent_model", "format", "family", "families", "parameter_size", "quantization_level"}
Json details_json(const models::LocalModel& m);
// /api/tags: every model served, with the context each was trained for beside Ollama's fields.
Json tags_json(std::span<const models::LocalModel> models);
// /api/show: the model's details, its header's metadata (scalars; arrays such as the vocabulary
// left out), its chat template family and the sampling defaults, and what it can do (with the
// chat template family `chat_template` names, where the server overrides the file's).
Json show_json(const models::LocalModel& m, const models::GgufFile& header, std::string_view chat_template = {});
// One model of /api/ps: loaded, holding `bytes`, until `expires` (nullopt: until memory is needed).
Json running_json(const models::LocalModel& m, uint64_t bytes, int n_ctx, std::optional<std::chrono::system_clock::time_point> expires);

// /api/embed: {"model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"}.
Json embed_json(const std::string& model, std::span<const runtime::GenerateResult> results, const Timings& t);

}  // namespace strata::ollama

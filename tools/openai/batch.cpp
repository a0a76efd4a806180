#include "tools/openai/batch.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/openai/response.h"

namespace strata::openai {

using nlohmann::json;

namespace {
void parse_into(BatchLine& out, std::string_view text, const ModelContext& model) {
    const Json line = parse_json_limited(text, "the line", "invalid_json_line");
    if (!line.is_object()) throw invalid_request("the line is not a JSON object", {}, "invalid_json_line");
    const auto id = line.find("custom_id");
    if (id == line.end() || !id->is_string() || id->get<std::string>().empty())
        throw invalid_request("'custom_id' is missing or not a non-empty string", "custom_id", "missing_custom_id");
    out.custom_id = id->get<std::string>();
    if (line.value("method", Json()) != "POST")
        throw invalid_request("'method' must be \"POST\"", "method", "invalid_method");
    const auto url = line.find("url");
    const auto endpoint = url != line.end() && url->is_string() ? endpoint_from_url(url->get<std::string>()) : std::nullopt;
    if (!endpoint) throw invalid_request("'url' must be \"/v1/chat/completions\" or \"/v1/completions\"", "url", "invalid_url");
    const auto body = line.find("body");
    if (body == line.end() || !body->is_object()) throw invalid_request("'body' must be an object", "body", "invalid_body");
    CompletionRequest req = parse_completion_request(*endpoint, *body, model);
    if (req.stream) throw invalid_request("'stream' is not available in a batch", "body.stream");
    if (req.n != 1) throw invalid_request("'n' above 1 is not available in a batch: write a line per choice", "body.n");
    req.model = model.model_id;  // every line runs on the one model loaded: the answers name it
    out.request = std::move(req);
}
}  // namespace

BatchLine parse_batch_line(std::string_view text, size_t line_no, const ModelContext& model) {
    BatchLine out;
    out.line_no = line_no;
    try {
        parse_into(out, text, model);
    } catch (const ApiError& e) {
        out.request.reset();
        out.error = e;
    }
    return out;
}

json batch_success_record(const std::string& custom_id, const CompletionRequest& request, const runtime::GenerateResult& r,
                          const models::Tokenizer& tok) {
    const auto meta = CompletionMeta::make(request.endpoint, request.model);
    const Choice choice = make_choice(0, r, request);
    const json body = completion_json(meta, {&choice, 1}, usage_json({&r, 1}), tok);
    return {{"id", random_id("batch_req")},
            {"custom_id", custom_id},
            {"response", {{"status_code", 200}, {"request_id", random_id("req")}, {"body", body}}},
            {"error", nullptr}};
}

json batch_error_record(const std::optional<std::string>& custom_id, size_t line_no, const ApiError& e) {
    return {{"id", random_id("batch_req")},
            {"custom_id", custom_id ? json(*custom_id) : json(nullptr)},
            {"response", nullptr},
            {"error", {{"code", e.code().empty() ? "invalid_request" : e.code()}, {"message", e.what()}, {"line", line_no}}}};
}

}  // namespace strata::openai

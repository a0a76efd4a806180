#pragma once
// OpenAI's batch file format, one JSON object a line. Input:
//   {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions", "body": {...}}
// Output: {"id", "custom_id", "response": {"status_code": 200, "request_id", "body"}, "error": null}
// or, for a request that cannot run, {"id", "custom_id", "response": null, "error": {"code", "message", "line"}}.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "runtime/engine.h"
#include "tools/openai/api_error.h"
#include "tools/openai/request.h"

namespace strata::openai {

struct BatchLine {
    size_t line_no = 0;                       // 1-based, in the input file
    std::optional<std::string> custom_id;     // when the line has a valid one
    std::optional<CompletionRequest> request; // when the whole line is valid
    std::optional<ApiError> error;            // otherwise: why not
};

// Never throws for bad input: the error is in the result.
BatchLine parse_batch_line(std::string_view text, size_t line_no, const ModelContext& model);

// The output record of a finished request.
nlohmann::json batch_success_record(const std::string& custom_id, const CompletionRequest& request, const runtime::GenerateResult& r,
                                    const models::Tokenizer& tok);
// The output record of a line that could not run. `line` lets a rerun recognise records
// without a custom_id.
nlohmann::json batch_error_record(const std::optional<std::string>& custom_id, size_t line_no, const ApiError& e);

}  // namespace strata::openai

#pragma once
// An error as the OpenAI API reports it: an HTTP status and the body
// {"error": {"message", "type", "param", "code"}}. Thrown while reading a request and
// caught at the HTTP or batch edge, where it becomes the response or the error record.
#include <stdexcept>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace strata::openai {

class ApiError : public std::runtime_error {
public:
    ApiError(int status, std::string message, std::string type, std::string param = {}, std::string code = {})
        : std::runtime_error(std::move(message)), status_(status), type_(std::move(type)), param_(std::move(param)),
          code_(std::move(code)) {}

    int status() const { return status_; }
    const std::string& type() const { return type_; }
    const std::string& param() const { return param_; }  // the offending field, empty when none
    const std::string& code() const { return code_; }
    // {"error": {...}}; param and code are null when empty, as OpenAI sends them.
    nlohmann::json to_json() const;

private:
    int status_;
    std::string type_, param_, code_;
};

// 400 invalid_request_error naming the field.
ApiError invalid_request(std::string message, std::string param = {}, std::string code = {});

}  // namespace strata::openai

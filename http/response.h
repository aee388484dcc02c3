// The API's error shape and response value: ApiError (thrown by handlers with an HTTP status and a stable
// code) and builders for Response bodies, errors always as {"error": {"code": "...", "message": "..."}}.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace capsule::http {

// One complete HTTP response as a handler returns it. `content_type` is omitted when empty; `headers` are set
// after it (a repeated name replaces the earlier value). Content-Length is computed by the server.
struct Response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// Thrown by request handlers (and the code they call): the server answers with `status` and an error body
// carrying `code` (a stable machine-readable token such as "not_found") and what() as the message.
struct ApiError : std::runtime_error {
  unsigned status;
  std::string code;
  ApiError(unsigned status, std::string code, std::string message);
};

// {"error":{"code":...,"message":...}} serialised; invalid UTF-8 in the message is replaced, never thrown on.
std::string error_body(const std::string& code, const std::string& message);
Response error_response(unsigned status, const std::string& code, const std::string& message);
// `body` serialised as application/json (invalid UTF-8 replaced).
Response json_response(unsigned status, const nlohmann::json& body);

}  // namespace capsule::http

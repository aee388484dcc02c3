// The API's error shape and response value: ApiError (thrown by handlers with a stable code that
// http/error_status.h maps to a status) and builders for Response bodies, errors always as {"error": {"code": "...", "message": "..."}}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace capsule::http {

// One complete HTTP response as a handler returns it. `content_type` is omitted when empty; `headers` are set
// after it (a repeated name replaces the earlier value). Content-Length is computed by the server.
struct Response {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// A caller's mistake or a refusal, thrown by request handlers and the code they call: a base::Error whose
// code (a stable token such as "not_found") gives the status through http::status_for and whose what() is
// the whole message. Any base::Error escaping a handler is answered the same way (its code, its message).
struct ApiError : base::Error {
  ApiError(std::string code, const std::string& message) : base::Error(std::move(code), message) {}
};

// {"error":{"code":...,"message":...}} serialised; invalid UTF-8 in the message is replaced, never thrown on.
std::string error_body(const std::string& code, const std::string& message);
// status_for(code) with the error body.
Response error_response(const std::string& code, const std::string& message);
// `body` serialised as application/json (invalid UTF-8 replaced).
Response json_response(unsigned status, const nlohmann::json& body);

}  // namespace capsule::http

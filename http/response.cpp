// The API's error shape: ApiError and the JSON bodies of error and plain JSON responses.
// Serialisation replaces invalid UTF-8 so building an error response never throws on odd input.
#include "http/response.h"

namespace capsule::http {

namespace {

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

ApiError::ApiError(unsigned status_, std::string code_, std::string message)
    : std::runtime_error(std::move(message)), status(status_), code(std::move(code_)) {}

std::string error_body(const std::string& code, const std::string& message) {
  return dump({{"error", {{"code", code}, {"message", message}}}});
}

Response error_response(unsigned status, const std::string& code, const std::string& message) {
  Response response;
  response.status = status;
  response.body = error_body(code, message);
  return response;
}

Response json_response(unsigned status, const nlohmann::json& body) {
  Response response;
  response.status = status;
  response.body = dump(body);
  return response;
}

}  // namespace capsule::http

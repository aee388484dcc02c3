// The API's error shape: the JSON bodies of error and plain JSON responses.
// Serialisation replaces invalid UTF-8 so building an error response never throws on odd input.
#include "http/response.h"

#include "http/error_status.h"

namespace capsule::http {

namespace {

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string error_body(const std::string& code, const std::string& message) {
  return dump({{"error", {{"code", code}, {"message", message}}}});
}

Response error_response(const std::string& code, const std::string& message) {
  Response response;
  response.status = status_for(code);
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

// libFuzzer target: raw bytes through the server's request pipeline (parse_request_bytes: the Beast parser with
// the server's limits, header checks, target decoding and routing) with the API's routes, checking invariants.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "http/request_parser.h"
#include "http/router.h"
#include "http/target.h"

namespace {

namespace http = capsule::http;

void check(bool ok, const char* invariant) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_http_request: invariant violated: %s\n", invariant);
  std::abort();
}

// The (method, pattern) shapes daemon/api.cpp registers, then the rest of the API sketch in ARCHITECTURE.md
// (PUT and DELETE, literal segments next to parameters). Handlers are never called: parsing stops at routing.
const std::pair<const char*, const char*> kRoutes[] = {
    {"GET", "/v1/version"},
    {"GET", "/v1/health"},
    {"GET", "/metrics"},
    {"POST", "/v1/runs"},
    {"GET", "/v1/runs"},
    {"GET", "/v1/runs/{id}"},
    {"GET", "/v1/runs/{id}/logs"},
    {"POST", "/v1/runs/{id}/cancel"},
    // Planned routes.
    {"POST", "/v1/runs/{id}/replay"},
    {"POST", "/v1/images"},
    {"GET", "/v1/images"},
    {"GET", "/v1/images/{ref}"},
    {"DELETE", "/v1/images/{ref}"},
    {"POST", "/v1/snapshots"},
    {"GET", "/v1/snapshots/{digest}"},
    {"POST", "/v1/sessions"},
    {"POST", "/v1/sessions/{id}/exec"},
    {"PUT", "/v1/sessions/{id}/files"},
    {"GET", "/v1/sessions/{id}/files"},
    {"GET", "/v1/sessions/{id}/diff"},
    {"POST", "/v1/sessions/{id}/snapshot"},
    {"DELETE", "/v1/sessions/{id}"},
};

const http::Router& router() {
  static const http::Router instance = [] {
    http::Router r;
    for (const auto& [method, pattern] : kRoutes) r.add(method, pattern, [](const http::Request&) { return http::Response{}; });
    return r;
  }();
  return instance;
}

// The server's defaults, and small limits so that 431 and 413 are reachable within -max_len.
const http::ServerOptions& default_options() {
  static const http::ServerOptions options;
  return options;
}
const http::ServerOptions& small_options() {
  static const http::ServerOptions options = [] {
    http::ServerOptions o;
    o.max_header_bytes = 512;
    o.max_body_bytes = 1024;
    return o;
  }();
  return options;
}

void check_error(const http::Response& error) {
  check(error.status >= 400 && error.status <= 599, "an error response has a 4xx/5xx status");
  check(error.content_type == "application/json", "an error response is JSON");
  const auto body = nlohmann::json::parse(error.body, nullptr, /*allow_exceptions=*/false);
  check(body.is_object() && body.contains("error") && body["error"].is_object(), "an error body is {\"error\": {...}}");
  const auto& inner = body["error"];
  check(inner.contains("code") && inner["code"].is_string() && !inner["code"].get<std::string>().empty(),
        "an error body has a code");
  check(inner.contains("message") && inner["message"].is_string(), "an error body has a message");
  if (error.status == 405) {
    bool allow = false;
    for (const auto& [name, value] : error.headers) allow = allow || (name == "Allow" && !value.empty());
    check(allow, "405 carries an Allow header");
  }
}

void check_request(const http::ParsedRequest& parsed, const http::ServerOptions& options) {
  const http::Request& request = parsed.request;
  check(parsed.handler != nullptr, "a routed request has a handler");
  check(!request.method.empty(), "a routed request has a method");
  check(!request.target.empty() && request.target.front() == '/', "a routed target starts with '/'");
  check(!request.path.empty() && request.path.front() == '/', "a routed path starts with '/'");
  check(request.body.size() <= options.max_body_bytes, "the body is within max_body_bytes");
  for (const auto& [name, value] : request.headers) check(!name.empty(), "header names are not empty");
  // The decoded target must decode the same way again (what the handlers see is what was routed).
  const auto again = capsule::http::parse_target(request.target);
  check(again.has_value() && again->path == request.path && again->query == request.query,
        "the target decodes the same way twice");
  static const std::set<std::string> kParamNames = {"id", "ref", "digest"};
  for (const auto& [name, value] : request.params) {
    check(kParamNames.count(name) == 1, "route parameters are named by the patterns");
    check(value.find('\0') == std::string::npos, "route parameters hold no NUL byte");
  }
  check(request.path.find('\0') == std::string::npos, "the decoded path holds no NUL byte");
}

void check_parsed(const http::ParsedRequest& parsed, const http::ServerOptions& options) {
  if (!parsed.complete) {
    check(!parsed.error && parsed.handler == nullptr, "an incomplete request has neither error nor handler");
    return;
  }
  if (parsed.error) {
    check(parsed.handler == nullptr, "an error has no handler");
    check_error(*parsed.error);
    return;
  }
  check_request(parsed, options);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const http::ParsedRequest with_defaults = http::parse_request_bytes(bytes, router(), default_options());
  check_parsed(with_defaults, default_options());
  const http::ParsedRequest with_small = http::parse_request_bytes(bytes, router(), small_options());
  check_parsed(with_small, small_options());
  // Tighter limits can only turn an answer into 431/413, never into a different request.
  if (with_small.complete && !with_small.error) {
    check(with_defaults.complete && !with_defaults.error, "a request accepted under small limits is accepted");
    const http::Request& a = with_defaults.request;
    const http::Request& b = with_small.request;
    check(a.method == b.method && a.target == b.target && a.body == b.body && a.headers == b.headers &&
              a.params == b.params && with_defaults.handler == with_small.handler,
          "small and default limits parse the same request");
  }
  return 0;
}

// Routing for the HTTP server: handlers registered by method and path pattern ("/v1/runs/{id}/logs"), and the
// match that picks one for a decoded path or says why none fits (404, or 405 with the allowed methods).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/request.h"
#include "http/responder.h"
#include "http/response.h"

namespace capsule::http {

// Handlers run on the connection's strand (an io_context thread): long work belongs elsewhere, answering
// through a kept Responder. ApiError thrown from a handler becomes that status and code; any other exception
// becomes 500 internal_error (logged).
using Handler = std::function<void(const Request&, Responder)>;
using SimpleHandler = std::function<Response(const Request&)>;

class Router {
 public:
  // `pattern` is an absolute path whose segments are literals or "{name}" ("/v1/runs/{id}/logs"). A path
  // parameter matches one segment; clients percent-encode a '/' inside it as %2F. A last segment "{name...}"
  // matches one or more remaining segments, joined with '/'. Literal segments win over parameters, and
  // parameters over a rest. Throws std::invalid_argument for a malformed pattern or a duplicate (method, pattern shape).
  void add(std::string method, std::string pattern, Handler handler);
  void add(std::string method, std::string pattern, SimpleHandler handler);

  // (method, pattern) in the order added, e.g. for checking the API reference lists every route.
  std::vector<std::pair<std::string, std::string>> routes() const;

  struct Match {
    const Handler* handler = nullptr;          // set when a route matched
    std::map<std::string, std::string> params;
    std::optional<Response> error;             // 404 not_found, or 405 method_not_allowed with an Allow header
  };
  // `segments` are the decoded path segments ("/v1/runs/x" -> {"v1", "runs", "x"}).
  Match match(std::string_view method, const std::vector<std::string>& segments) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;  // literal text, or "{name}"
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace capsule::http

// The Router declared in http/router.h: route patterns with {name} and {name...} segments, duplicate checks,
// literal-over-parameter precedence, and the 404/405 answers when nothing matches.
#include "http/router.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "http/target.h"

namespace capsule::http {
namespace {

bool is_param(const std::string& segment) { return segment.size() >= 2 && segment.front() == '{'; }
bool is_rest_param(const std::string& segment) { return segment.size() >= 5 && segment.ends_with("...}"); }
std::string param_name(const std::string& segment) {
  return segment.substr(1, segment.size() - (is_rest_param(segment) ? 5 : 2));
}

std::string join_path(const std::vector<std::string>& segments) {
  std::string path;
  for (const auto& segment : segments) path += "/" + segment;
  return path;
}

}  // namespace

void Router::add(std::string method, std::string pattern, Handler handler) {
  if (method.empty() || !handler) throw std::invalid_argument("route " + pattern + ": empty method or handler");
  if (pattern.empty() || pattern.front() != '/') throw std::invalid_argument("route " + pattern + ": must start with '/'");
  Route route{method, pattern, {}, std::move(handler)};
  std::set<std::string> names;
  for (auto part : detail::split(std::string_view(pattern).substr(1), '/')) {
    std::string segment(part);
    const bool param = is_param(segment) && segment.back() == '}' && segment.find_first_of("{}", 1) == segment.size() - 1;
    if (!param && segment.find_first_of("{}") != std::string::npos) {
      throw std::invalid_argument("route " + pattern + ": malformed segment '" + segment + "'");
    }
    if (!route.segments.empty() && is_rest_param(route.segments.back())) {
      throw std::invalid_argument("route " + pattern + ": " + route.segments.back() + " must be the last segment");
    }
    if (param && !names.insert(param_name(segment)).second) {
      throw std::invalid_argument("route " + pattern + ": repeated " + segment);
    }
    route.segments.push_back(std::move(segment));
  }
  const auto shape = [](const Route& r) {
    std::vector<std::string> out;
    for (const auto& s : r.segments) out.push_back(is_rest_param(s) ? "{...}" : is_param(s) ? "{}" : s);
    return out;
  };
  for (const auto& existing : routes_) {
    if (existing.method == route.method && shape(existing) == shape(route)) {
      throw std::invalid_argument("route " + method + " " + pattern + " duplicates " + existing.pattern);
    }
  }
  routes_.push_back(std::move(route));
}

void Router::add(std::string method, std::string pattern, SimpleHandler handler) {
  if (!handler) throw std::invalid_argument("route " + pattern + ": empty handler");
  add(std::move(method), std::move(pattern),
      Handler([handler = std::move(handler)](const Request& request, Responder responder) {
        responder.respond(handler(request));
      }));
}

std::vector<std::pair<std::string, std::string>> Router::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& route : routes_) out.emplace_back(route.method, route.pattern);
  return out;
}

Router::Match Router::match(std::string_view method, const std::vector<std::string>& segments) const {
  const Route* best = nullptr;
  std::string best_rank;  // per segment '0' literal, '1' parameter: smaller is more specific
  std::set<std::string> allowed;
  for (const auto& route : routes_) {
    const bool rest = !route.segments.empty() && is_rest_param(route.segments.back());
    if (rest ? segments.size() < route.segments.size() : route.segments.size() != segments.size()) continue;
    std::string rank;
    for (std::size_t i = 0; i < route.segments.size() && rank.size() == i; ++i) {
      if (is_rest_param(route.segments[i])) rank += '2';
      else if (is_param(route.segments[i])) rank += '1';
      else if (route.segments[i] == segments[i]) rank += '0';
    }
    if (rank.size() != route.segments.size()) continue;
    allowed.insert(route.method);
    if (route.method == method && (!best || rank < best_rank)) {
      best = &route;
      best_rank = std::move(rank);
    }
  }
  Match match;
  const std::string path = join_path(segments);
  if (best) {
    match.handler = &best->handler;
    for (std::size_t i = 0; i < best->segments.size(); ++i) {
      const auto& segment = best->segments[i];
      if (is_rest_param(segment)) {
        std::string rest;
        for (std::size_t j = i; j < segments.size(); ++j) rest += (j == i ? "" : "/") + segments[j];
        match.params[param_name(segment)] = std::move(rest);
      } else if (is_param(segment)) {
        match.params[param_name(segment)] = segments[i];
      }
    }
  } else if (allowed.empty()) {
    match.error = error_response("not_found", "no such resource: " + path);
  } else {
    std::string allow;
    for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
    match.error = error_response("method_not_allowed",
                                 "method " + std::string(method) + " is not allowed on " + path + " (allowed: " + allow + ")");
    match.error->headers.emplace_back("Allow", allow);
  }
  return match;
}

}  // namespace capsule::http

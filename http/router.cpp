// The Router and request-target decoding declared in daemon/http_server.h: route patterns with {name} and
// {name...} segments, literal-over-parameter precedence, 404/405 answers, and strict percent-decoding.
#include "http/server.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace capsule::http {
namespace {

bool is_param(const std::string& segment) { return segment.size() >= 2 && segment.front() == '{'; }
bool is_rest_param(const std::string& segment) { return segment.size() >= 5 && segment.ends_with("...}"); }
std::string param_name(const std::string& segment) {
  return segment.substr(1, segment.size() - (is_rest_param(segment) ? 5 : 2));
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

std::string join_path(const std::vector<std::string>& segments) {
  std::string path;
  for (const auto& segment : segments) path += "/" + segment;
  return path;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// ---- target decoding ----

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = hex_value(text[i + 1]);
      const int low = hex_value(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      c = static_cast<char>(high * 16 + low);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out.push_back(c);
  }
  return out;
}

std::optional<ParsedTarget> parse_target(std::string_view target) {
  target = target.substr(0, target.find('#'));
  if (target.empty() || target.front() != '/') return std::nullopt;
  const auto question = target.find('?');
  const auto raw_path = target.substr(0, question);
  ParsedTarget out;
  auto path = percent_decode(raw_path, false);
  if (!path) return std::nullopt;
  out.path = std::move(*path);
  for (auto raw : split(raw_path.substr(1), '/')) {
    auto segment = percent_decode(raw, false);
    if (!segment || *segment == "." || *segment == "..") return std::nullopt;
    out.segments.push_back(std::move(*segment));
  }
  if (question != std::string_view::npos) {
    for (auto item : split(target.substr(question + 1), '&')) {
      if (item.empty()) continue;
      const auto equals = item.find('=');
      auto key = percent_decode(item.substr(0, equals), true);
      auto value = percent_decode(equals == std::string_view::npos ? "" : item.substr(equals + 1), true);
      if (!key || !value) return std::nullopt;
      out.query[std::move(*key)] = std::move(*value);
    }
  }
  return out;
}

// ---- routing ----

void Router::add(std::string method, std::string pattern, Handler handler) {
  if (method.empty() || !handler) throw std::invalid_argument("route " + pattern + ": empty method or handler");
  if (pattern.empty() || pattern.front() != '/') throw std::invalid_argument("route " + pattern + ": must start with '/'");
  Route route{method, pattern, {}, std::move(handler)};
  std::set<std::string> names;
  for (auto part : split(std::string_view(pattern).substr(1), '/')) {
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

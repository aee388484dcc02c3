// Request-target decoding declared in http/target.h: strict %XX decoding ('+' as a space only in the query),
// path segments without "." or "..", and the query as a map where a repeated key keeps its last value.
#include "http/target.h"

namespace capsule::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

namespace detail {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

}  // namespace detail

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
  for (auto raw : detail::split(raw_path.substr(1), '/')) {
    auto segment = percent_decode(raw, false);
    if (!segment || *segment == "." || *segment == "..") return std::nullopt;
    out.segments.push_back(std::move(*segment));
  }
  if (question != std::string_view::npos) {
    for (auto item : detail::split(target.substr(question + 1), '&')) {
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

}  // namespace capsule::http

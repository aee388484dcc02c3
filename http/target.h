// Request-target decoding: an origin-form target split into its path segments and query, strictly
// percent-decoded, so routing and handlers only ever see decoded text (and never an encoded NUL or "..").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace capsule::http {

// An origin-form request target split and percent-decoded. nullopt for anything else ("*", absolute-form),
// malformed %-escapes, an encoded NUL byte, or a "." or ".." segment.
struct ParsedTarget {
  std::string path;
  std::vector<std::string> segments;
  std::map<std::string, std::string> query;
};
std::optional<ParsedTarget> parse_target(std::string_view target);
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

namespace detail {
// `text` cut at every `separator`, keeping empty parts ("a//b" -> {"a", "", "b"}); also splits route patterns.
std::vector<std::string_view> split(std::string_view text, char separator);
}  // namespace detail

}  // namespace capsule::http

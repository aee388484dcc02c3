// ASCII character classes and case folding for the parsers of names, versions and URLs (PEP 440/503, Maven, HTTP):
// locale-independent, unlike <cctype>, and one copy instead of one per parser.
#pragma once

#include <string>
#include <string_view>

namespace capsule::base {

constexpr bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_ascii_alnum(char c) { return is_ascii_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
inline std::string ascii_lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

}  // namespace capsule::base

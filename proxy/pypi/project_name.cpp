// PEP 503 name normalization and the PEP 508 name grammar, ASCII only (no locale).
#include "proxy/pypi/project_name.h"

namespace capsule::proxy::pypi {
namespace {

bool is_separator(char c) { return c == '-' || c == '_' || c == '.'; }

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

char to_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

}  // namespace

std::string normalize_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!is_separator(name[i])) {
      out += to_lower(name[i]);
      continue;
    }
    out += '-';
    while (i + 1 < name.size() && is_separator(name[i + 1])) ++i;
  }
  return out;
}

bool is_valid_name(std::string_view name) {
  if (name.empty() || !is_alnum(name.front()) || !is_alnum(name.back())) return false;
  for (const char c : name)
    if (!is_alnum(c) && !is_separator(c)) return false;
  return true;
}

}  // namespace capsule::proxy::pypi

// PEP 503 name normalization and the PEP 508 name grammar, ASCII only (no locale).
#include "proxy/pypi/project_name.h"

#include "base/ascii.h"

namespace capsule::proxy::pypi {
namespace {

bool is_name_separator(char c) { return c == '-' || c == '_' || c == '.'; }

}  // namespace

std::string normalize_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!is_name_separator(name[i])) {
      out += base::ascii_lower(name[i]);
      continue;
    }
    out += '-';
    while (i + 1 < name.size() && is_name_separator(name[i + 1])) ++i;
  }
  return out;
}

bool is_valid_name(std::string_view name) {
  if (name.empty() || !base::is_ascii_alnum(name.front()) || !base::is_ascii_alnum(name.back())) return false;
  for (const char c : name)
    if (!base::is_ascii_alnum(c) && !is_name_separator(c)) return false;
  return true;
}

}  // namespace capsule::proxy::pypi

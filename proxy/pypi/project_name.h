// PyPI project names: the PEP 503 normalized form used in URLs and cache keys, and the PEP 508 name grammar
// that decides whether a requested name can name a project at all.
#pragma once

#include <string>
#include <string_view>

namespace capsule::proxy::pypi {

// Lowercase ASCII, every run of '-', '_' and '.' collapsed to one '-' ("Foo.__Bar" -> "foo-bar").
std::string normalize_name(std::string_view name);

// PEP 508: ASCII letters and digits at both ends, letters, digits, '-', '_', '.' inside; not empty.
bool is_valid_name(std::string_view name);

}  // namespace capsule::proxy::pypi

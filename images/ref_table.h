// The ref table: <store>/refs.json mapping "name:tag" to a manifest digest. Read whole, written whole by
// an atomic rename; the caller serialises read-modify-write cycles with a StoreLock.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "store/digest.h"

namespace capsule::images {

using RefTable = std::map<std::string, store::Digest>;  // canonical "name:tag" -> manifest digest

// An absent file is an empty table; a malformed one throws ImageError{step "refs"} (never silently reset).
RefTable load_refs(const std::filesystem::path& file);
void save_refs(const std::filesystem::path& file, const RefTable& refs);

}  // namespace capsule::images

// The ref table: <store>/refs.json mapping "name:tag" to a manifest digest and who may use it. Read whole,
// written whole by an atomic rename; the caller serialises read-modify-write cycles with a StoreLock.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/digest.h"

namespace capsule::images {

// Who may use a ref: its owner, everyone when public, the members of `group` when shared with one. Entries
// written before refs had owners read as root's public (system) refs.
struct RefAccess {
  uid_t owner = 0;
  bool is_public = true;
  std::optional<gid_t> group;
};

struct RefEntry {
  store::Digest digest;
  RefAccess access;
};

using RefTable = std::map<std::string, RefEntry>;  // canonical "name:tag" -> entry

// Whose view of the store a call takes: `sees_all` (root, the admin group, the daemon itself) sees and may
// change every ref; anyone else sees the refs visible to it and changes only its own.
struct RefViewer {
  bool sees_all = true;
  uid_t uid = 0;
  std::vector<gid_t> groups;  // primary and supplementary

  bool may_see(const RefAccess& access) const;
  bool may_change(const RefAccess& access) const { return sees_all || access.owner == uid; }
};

// Pointing a ref: the access the ref gets, by a writer that may or may not replace someone else's ref.
struct RefWrite {
  RefAccess access;
  bool replaces_others = true;
};

// An absent file is an empty table; a malformed one throws ImageError{step "refs"} (never silently reset).
RefTable load_refs(const std::filesystem::path& file);
void save_refs(const std::filesystem::path& file, const RefTable& refs);

}  // namespace capsule::images

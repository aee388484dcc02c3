// What a read-only bind of the existing protected paths cannot stop: a new file matching a protect glob (a root
// conftest.py, a tests/test_x.py) or one deleted or changed, found in the cow workspace's diff after the command.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/record/workspace_diff.h"

namespace capsule::daemon {

// Whether `glob`, as protect_paths reads it for a sandbox with a workspace (sandbox/protect.h: relative globs from
// /workspace, absolute ones from the root, "/workspace/tests/**"), covers the workspace path `path` (relative, as
// the diff lists it; an empty directory's trailing "/" ignored): it matches the path or a directory above it (a
// directory that matches is protected whole).
bool protect_covers(const std::string& glob, const std::string& path);

// Whether `diff` lists everything it found (not truncated, no errors): else what it left out cannot be allowed.
bool diff_complete(const WorkspaceDiff& diff);

// Limits of the walk made again for the check when the record's own diff was not complete (a build's output
// past its 10000 entries): ten times the listing's.
DiffLimits protect_walk_limits();

// record.protect_violations for `globs`: {path, reason: "protect: added, matches 'tests/**'"} for each added,
// modified or deleted entry of `diff` that a glob covers (the first glob that does is named), at most max_listed,
// then one {path: "", reason: "protect: N more ..."}; and one with path "" when the diff is not complete.
nlohmann::json protect_diff_violations(const std::vector<std::string>& globs, const WorkspaceDiff& diff,
                                       std::size_t max_listed = 100);

}  // namespace capsule::daemon

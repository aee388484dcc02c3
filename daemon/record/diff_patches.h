// The session diff with its text: for each file a WorkspaceDiff lists, a unified diff of its content in
// the lower (start) and upper (now) directories, read without following anything the sandbox planted.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon/record/unified_diff.h"
#include "daemon/record/workspace_diff.h"

namespace capsule::daemon {

struct PatchLimits {
  TextDiffLimits text;                             // each file (its size cap is also what is read of it)
  std::size_t max_total_patch_bytes = 8 << 20;     // patch text in one response
  std::size_t max_total_read_bytes = 64 << 20;     // file content read for one response
};

// diff.to_json() plus "patches": one object per listed file or symlink (empty directories, "dir/", have
// no content and no patch), sorted by path:
//   {"path", "status": "added"|"modified"|"deleted", "binary": bool, and then one of
//    "patch": "--- a/<path>\n+++ b/<path>\n@@ ...": the unified diff (/dev/null for the missing side of an
//             added or deleted file; "" when the contents are equal), paths quoted as git does when they
//             hold control characters, quotes or backslashes;
//    "too_large": true, "reason": "...": past limits.text (a binary file is only "binary": true; a file
//             past the size limit is judged binary or not on its first max_input_bytes);
//    "omitted": true: the read total was reached before this entry, or its patch would pass the patch
//             total; it and all later entries get no patch and are not read;
//    "error": "...": the entry could not be read (gone meanwhile, not a regular file or symlink, a bad path)}
// and "patches_omitted": <count> when any were. Contents come from `lower_dir` (the "-" side: modified
// and deleted entries, including those an overlayfs whiteout deletes) and `upper_dir` (the "+" side).
// Each path is resolved beneath the root's descriptor with no symlink followed on the way (openat2
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, base::open_beneath), its last component lstat-ed: a symlink's
// content is its target, never what it points at; FIFOs, sockets and devices (a whiteout 0:0 too) are
// refused without being opened or read; at most limits.text.max_input_bytes + 1 bytes of a file are read.
// Paths that are absolute or hold "", "." or ".." components are refused. Throws base::Error only when a
// root cannot be opened.
nlohmann::json diff_with_patches(const WorkspaceDiff& diff, const std::string& upper_dir,
                                 const std::string& lower_dir, const PatchLimits& limits = {});
// The same over two open directories, as diff_upper's descriptor form (workspace_diff.h).
nlohmann::json diff_with_patches(const WorkspaceDiff& diff, int upper_fd, int lower_fd, const PatchLimits& limits = {});

}  // namespace capsule::daemon

// The filesystem diff of a copy-on-write workspace: what a run added, modified and deleted, read from
// the overlayfs upper directory (whiteouts, opaque directories) against the lower (original) workspace.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace capsule::daemon {

struct DiffEntry {
  std::string path;        // relative, "/"-separated, no leading slash; a trailing "/" marks an empty directory
  std::uint64_t size = 0;  // bytes (lstat st_size: a symlink's target length); deleted: the size it had
  bool operator==(const DiffEntry&) const = default;
};

// What a sandbox can make the diff hold is bounded: the listing stops at these, the totals go on.
struct DiffLimits {
  std::size_t max_entries = 10000;        // listed entries, all three lists together
  std::size_t max_listed_bytes = 1 << 20; // sum of the listed paths' lengths
  std::size_t max_path_bytes = 4096;      // a longer path is listed cut, ending in "..."
  std::size_t max_depth = 128;            // directories below this depth are not walked (an error says so)
  std::size_t max_errors = 100;           // errors listed (all are counted)
};

struct WorkspaceDiff {
  std::vector<DiffEntry> added, modified, deleted;  // each sorted by path; at most DiffLimits allow
  std::uint64_t total_added = 0, total_modified = 0, total_deleted = 0;  // every entry found, listed or not
  // True when a list is shorter than its total, a path was cut, or an entry could not be read.
  bool truncated = false;
  std::vector<std::string> errors;  // "<path>: <cause>" for entries that could not be read (not walked below)
  std::uint64_t error_count = 0;
  // {"added": [{"path", "size"}...], "modified": [...], "deleted": [...], "truncated",
  //  "totals": {"added", "modified", "deleted"}} and, when there were any, "errors".
  // Paths that are not UTF-8 are listed with U+FFFD for each invalid byte.
  nlohmann::json to_json() const;
};

// Files and symlinks (never directories, except empty ones as "dir/") that differ between the merged view
// of `upper_dir` over `lower_dir` and `lower_dir` itself:
//  - whiteout (char device 0:0, or an empty file with overlay.whiteout) -> deleted, with everything below
//    it in lower when it hides a directory;
//  - directory with overlay.opaque = "y" -> whatever lower has below it and upper does not is deleted;
//  - file or symlink in upper -> modified if lower has a non-directory there, else added.
// Both user.overlay.* and trusted.overlay.* xattrs are understood. The walk is relative to open directory
// descriptors (deep trees past PATH_MAX work), never follows symlinks and does not enter other filesystems
// mounted below either root. An entry that cannot be read, or a renamed directory (overlay.redirect), is an
// error of that entry only. Throws base::Error only when a root cannot be opened (its cause names the root).
WorkspaceDiff diff_upper(const std::string& upper_dir, const std::string& lower_dir, const DiffLimits& limits = {});
// The same over two open directories (the caller keeps them open): a root no path may name again, as a non-root
// caller's workspace, which is used only through the descriptor opened as that caller (auth.h).
WorkspaceDiff diff_upper(int upper_fd, int lower_fd, const DiffLimits& limits = {});

// A diff root as a descriptor of its own (O_RDONLY | O_DIRECTORY): a path opened without following its last
// component, or an open directory reopened (openat "."), so that concurrent diffs of one root share no directory
// offset. Throws base::Error naming the root.
base::UniqueFd open_diff_root(const std::string& dir);
base::UniqueFd open_diff_root(int dir_fd);

}  // namespace capsule::daemon

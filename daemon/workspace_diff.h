// The filesystem diff of a copy-on-write workspace: what a run added, modified and deleted, read from
// the overlayfs upper directory (whiteouts, opaque directories) against the lower (original) workspace.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace capsule::daemon {

// An unreadable directory or file (path + errno text), or an upper dir this reader cannot interpret.
class WorkspaceDiffError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DiffEntry {
  std::string path;        // relative, "/"-separated, no leading slash; a trailing "/" marks an empty directory
  std::uint64_t size = 0;  // bytes (lstat st_size: a symlink's target length); deleted: the size it had
  bool operator==(const DiffEntry&) const = default;
};

struct WorkspaceDiff {
  std::vector<DiffEntry> added, modified, deleted;  // each sorted by path
  // {"added": [{"path", "size"}...], "modified": [...], "deleted": [...]}
  nlohmann::json to_json() const;
};

// Files and symlinks (never directories, except empty ones as "dir/") that differ between the merged view
// of `upper_dir` over `lower_dir` and `lower_dir` itself:
//  - whiteout (char device 0:0, or an empty file with overlay.whiteout) -> deleted, with everything below
//    it in lower when it hides a directory;
//  - directory with overlay.opaque = "y" -> whatever lower has below it and upper does not is deleted;
//  - file or symlink in upper -> modified if lower has a non-directory there, else added.
// Both user.overlay.* and trusted.overlay.* xattrs are understood. Symlinks are never followed and other
// filesystems mounted below either root are not entered. Renamed directories (overlay.redirect, only with
// redirect_dir=on) are rejected with WorkspaceDiffError rather than misreported.
WorkspaceDiff diff_upper(const std::string& upper_dir, const std::string& lower_dir);

}  // namespace capsule::daemon

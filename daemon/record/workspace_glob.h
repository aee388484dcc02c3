// Finding what a run left in its workspace: the glob matcher (*, ?, [..] per path segment, ** for any depth)
// under a search budget, and the bounded read of one untrusted file; shared by every record collector.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "base/error.h"

namespace capsule::daemon {

// A file, glob or root that could not be read or searched: a base::Error whose cause names the path (or glob)
// and the reason (cause().detail); what() is "report <path>: <reason>".
class CollectError : public base::Error {
 public:
  CollectError(std::string path, std::string reason)
      : base::Error(base::Cause{"report", std::move(path), 0, std::move(reason)}) {}
};

// What one collection may still spend (directory entries looked at, time), and what it could not do
// ("<rel>: <reason>").
struct SearchBudget {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::uint64_t visits_left = UINT64_MAX;
  std::vector<std::string> problems;
  bool exhausted = false;

  // Takes one visit of `rel`; false (and a problem noted once) when the budget is spent.
  bool spend(const std::string& rel);
};

// lstat(2); nullopt when the path does not exist. Throws CollectError for other failures.
std::optional<struct stat> lstat_if_exists(const std::string& path);

// Regular files below `root` (symlinks are never followed) matching any of the relative globs, as sorted,
// de-duplicated "/"-separated relative paths, within `budget` (what it could not search goes to its problems).
// `**` matches zero or more directories; wildcards do not match a leading '.' (so `**` skips hidden
// directories). Throws CollectError for an absolute glob or one with "..", or a root that is not a directory.
std::vector<std::string> glob_within(const std::string& root, const std::vector<std::string>& globs,
                                     SearchBudget& budget);

// glob_within without limits.
std::vector<std::string> glob_files(const std::string& root, const std::vector<std::string>& globs);

// Reads a regular file of at most `max_bytes` through one descriptor (O_NOFOLLOW | O_NONBLOCK): no FIFO,
// device or symlink is opened for reading, and nothing past the size checked on the descriptor is read.
// Throws CollectError.
std::string read_bounded_file(const std::string& path, std::uint64_t max_bytes);

}  // namespace capsule::daemon

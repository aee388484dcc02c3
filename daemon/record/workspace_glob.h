// Finding what a run left in its workspace: the glob matcher (*, ?, [..] per path segment, ** for any depth)
// under a search budget, and the bounded read of one untrusted file; shared by every record collector.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
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

// What one collection may still spend (directory entries looked at, files found, bytes of their paths, time),
// and what it could not do ("<rel>: <reason>", the first max_problems; the rest only counted).
struct SearchBudget {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::uint64_t visits_left = UINT64_MAX;
  std::size_t max_found = SIZE_MAX;          // the search stops once more files than this were found
  std::uint64_t found_bytes_left = 64ull << 20;  // of the found files' relative paths
  std::size_t max_problems = 100;
  std::vector<std::string> problems;
  std::uint64_t problems_not_listed = 0;
  bool exhausted = false;

  // Takes one visit of `rel`; false (and a problem noted once) when the budget is spent.
  bool spend(const std::string& rel);
  // Lists `problem`, or counts it once max_problems are listed.
  void note_problem(std::string problem);
  // Records a found file; false (and the search stopped, a problem noted) once too many were found.
  bool take_found(const std::string& rel, std::size_t found_before);
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

// Reads a regular file through one descriptor (O_NOFOLLOW | O_NONBLOCK): no FIFO, device or symlink is opened
// for reading. A file larger than `max_bytes` (st_size on the descriptor) is refused, or with `prefix` only its
// first `max_bytes` are read; never more than the size checked on the descriptor. Throws CollectError.
std::string read_bounded_file(const std::string& path, std::uint64_t max_bytes, bool prefix = false);

// Reads `rel` beneath the open directory `root_fd` (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: no symlink
// anywhere on the way, regular files only); refuses a file larger than `max_bytes`. Throws CollectError
// (ENOENT included: its detail starts with "open: No such file").
std::string read_beneath(int root_fd, const std::string& rel, std::uint64_t max_bytes);

// Cuts `text` to at most `max_bytes`, never inside a UTF-8 character.
void cut_utf8(std::string& text, std::size_t max_bytes);

// Untrusted text (an attribute value, an element name) for an error detail: at most `max_bytes` of it, cut on a
// UTF-8 boundary and followed by "..." when cut, with control characters, '"' and '\\' written as \xNN.
std::string quote_excerpt(std::string_view text, std::size_t max_bytes = 64);

// What one collector may spend finding and reading the files its globs match.
struct CollectLimits {
  std::size_t max_files = 0;             // files opened (read or refused, parsed or not)
  std::uint64_t max_file_bytes = 0;      // larger files are refused (with `prefix`: only this much is read)
  std::uint64_t max_total_bytes = 0;     // bytes read over all files
  bool prefix = false;
  std::uint64_t max_visited = 0;         // directory entries looked at while matching globs
  std::size_t max_listed = 100;          // search problems listed (the rest are summed up in one note)
  std::chrono::steady_clock::time_point deadline;  // for matching and reading together
  std::string what = "reports";          // what the files are, for the "not read" notes
};

// The shared part of a collector's own limits (JunitLimits, CoverageLimits, ClassfileLimits name these fields
// alike): files, entries visited, listed problems, and the earlier of its deadline and its time budget from now.
template <class CollectorLimits>
CollectLimits collect_limits_of(const CollectorLimits& limits) {
  CollectLimits collect;
  collect.max_files = limits.max_files;
  collect.max_visited = limits.max_visited;
  collect.max_listed = limits.max_listed;
  collect.deadline = std::min(limits.deadline, std::chrono::steady_clock::now() + limits.time_budget);
  return collect;
}

// The loop every collector shares: finds the regular files below `root` matching `globs` (glob_within), then
// opens each beneath `root` (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: no symlink anywhere on the way, no
// escape from the root, regular files only), reads it within `limits` and hands its bytes to `use`. Search
// problems, read failures, CollectErrors thrown by `use`, and files left unread ("<rel>: not read: <limit>")
// go to `note`. Throws CollectError for a bad glob or a root that is not a directory.
struct CollectOutcome {
  bool truncated = false;           // a limit stopped the search or left matched files unread
  std::uint64_t files_not_read = 0; // matched files not read (limits) or refused (read failures, `use` threw)
};
CollectOutcome collect_files(const std::string& root, const std::vector<std::string>& globs,
                             const CollectLimits& limits, const std::function<void(std::string)>& note,
                             const std::function<void(const std::string& rel, std::string& content)>& use);

}  // namespace capsule::daemon

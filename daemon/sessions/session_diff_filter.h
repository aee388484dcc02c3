// Path filters of a session's diff (GET /v1/sessions/{id}/diff?exclude=GLOB&include=GLOB, `capsule session diff
// --exclude`): which of the diff's entries are shown, so a build's output does not bury a three-line edit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/record/workspace_diff.h"

namespace capsule::daemon {

// At most this many globs, each at most kMaxDiffFilterGlobBytes, with at most kMaxDiffFilterStars "**" segments.
inline constexpr std::size_t kMaxDiffFilterGlobs = 32;
inline constexpr std::size_t kMaxDiffFilterGlobBytes = 1024;
inline constexpr std::size_t kMaxDiffFilterStars = 3;

struct DiffFilter {
  // Globs relative to the workspace, in the vocabulary of the session's protect globs (sandbox/protect.h: "*" and
  // "?" within one name, dot files included, "**" for any number of names); a glob that matches a directory
  // matches everything below it ("target" is "target/**").
  std::vector<std::string> include;  // none: every entry
  std::vector<std::string> exclude;

  bool empty() const { return include.empty() && exclude.empty(); }
  // Whether the entry at `path` (relative; an empty directory's ends in "/") is shown: it is matched by an
  // include glob (when there are any) and by no exclude glob.
  bool shows(std::string_view path) const;
  // {"include": [...], "exclude": [...]}
  nlohmann::json to_json() const;
};

// Every `include` and `exclude` value of a request target's query, percent-decoded, in order (other parameters
// are left alone). Throws http::ApiError invalid_query for an empty, absolute or ".." glob and past the limits.
DiffFilter parse_diff_filter(std::string_view target);

// Walk limits for a filtered diff: ten times the listing's, so that entries left out do not use up the listing
// before the ones shown are reached (the listing is cut back to `shown` afterwards).
DiffLimits filtered_walk_limits(const DiffLimits& shown = {});

// Leaves out of `diff` the entries `filter` does not show (and lowers its totals by as many), then cuts the lists
// back to `shown`'s max_entries and max_listed_bytes (the paths last in order go; `truncated` says so). Returns
// how many listed entries the filter left out.
std::uint64_t apply_diff_filter(WorkspaceDiff& diff, const DiffFilter& filter, const DiffLimits& shown = {});

}  // namespace capsule::daemon

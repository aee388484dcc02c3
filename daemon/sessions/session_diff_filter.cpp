// Session diff filters: read from the query's repeated include/exclude values, matched with the protect globs'
// matcher (a glob G shows or hides G's matches and everything below them: G + "/**"), applied to a listed diff.
#include "daemon/sessions/session_diff_filter.h"

#include <algorithm>

#include "http/response.h"
#include "http/target.h"
#include "sandbox/protect.h"

namespace capsule::daemon {
namespace {

std::size_t star_segments(const std::string& glob) {
  std::size_t count = 0;
  for (std::size_t start = 0; start <= glob.size();) {
    const std::size_t end = std::min(glob.find('/', start), glob.size());
    if (glob.compare(start, end - start, "**") == 0) ++count;
    start = end + 1;
  }
  return count;
}

// The glob as matched: without a trailing "/", then "/**" so that it also matches below what it names.
std::string as_subtree(std::string glob) {
  while (glob.size() > 1 && glob.back() == '/') glob.pop_back();
  return glob + "/**";
}

void check_filter_glob(const std::string& name, const std::string& glob) {
  auto refuse = [&](const std::string& why) {
    throw http::ApiError("invalid_query", name + ": '" + glob.substr(0, 64) + "' " + why);
  };
  if (glob.empty() || glob == "/") refuse("is empty");
  if (glob.size() > kMaxDiffFilterGlobBytes) refuse("is longer than " + std::to_string(kMaxDiffFilterGlobBytes) + " bytes");
  if (glob.front() == '/') refuse("must be relative to the workspace");
  if (glob == ".." || glob.starts_with("../") || glob.find("/../") != std::string::npos || glob.ends_with("/..")) {
    refuse("must not hold ..");
  }
  if (star_segments(glob) > kMaxDiffFilterStars) refuse("has more than " + std::to_string(kMaxDiffFilterStars) + " ** segments");
}

bool matches_any_filter(const std::vector<std::string>& globs, const std::string& path) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& glob) { return sandbox::protect_glob_matches(as_subtree(glob), path); });
}

std::size_t listed_count(const WorkspaceDiff& diff) { return diff.added.size() + diff.modified.size() + diff.deleted.size(); }

std::size_t listed_bytes(const WorkspaceDiff& diff) {
  std::size_t bytes = 0;
  for (const auto* list : {&diff.added, &diff.modified, &diff.deleted}) {
    for (const DiffEntry& entry : *list) bytes += entry.path.size();
  }
  return bytes;
}

}  // namespace

bool DiffFilter::shows(std::string_view path) const {
  std::string relative(path);
  while (!relative.empty() && relative.back() == '/') relative.pop_back();  // an empty directory, "dir/"
  if (!include.empty() && !matches_any_filter(include, relative)) return false;
  return !matches_any_filter(exclude, relative);
}

nlohmann::json DiffFilter::to_json() const { return {{"include", include}, {"exclude", exclude}}; }

DiffFilter parse_diff_filter(std::string_view target) {
  DiffFilter filter;
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return filter;
  const std::string_view query = target.substr(question + 1);
  for (std::size_t start = 0; start <= query.size();) {
    const std::size_t end = std::min(query.find('&', start), query.size());
    const std::string_view pair = query.substr(start, end - start);
    start = end + 1;
    const std::size_t equals = pair.find('=');
    const std::optional<std::string> key = http::percent_decode(pair.substr(0, equals), true);
    if (!key || (*key != "include" && *key != "exclude")) continue;
    const std::optional<std::string> value =
        http::percent_decode(equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1), true);
    if (!value) throw http::ApiError("invalid_query", *key + ": is not percent-encoded text");
    check_filter_glob(*key, *value);
    (*key == "include" ? filter.include : filter.exclude).push_back(*value);
    if (filter.include.size() + filter.exclude.size() > kMaxDiffFilterGlobs) {
      throw http::ApiError("invalid_query", "include, exclude: at most " + std::to_string(kMaxDiffFilterGlobs) + " globs");
    }
  }
  return filter;
}

DiffLimits filtered_walk_limits(const DiffLimits& shown) {
  DiffLimits walk = shown;
  walk.max_entries = shown.max_entries * 10;
  walk.max_listed_bytes = shown.max_listed_bytes * 10;
  return walk;
}

std::uint64_t apply_diff_filter(WorkspaceDiff& diff, const DiffFilter& filter, const DiffLimits& shown) {
  std::uint64_t left_out = 0;
  for (auto [list, total] : {std::pair{&diff.added, &diff.total_added}, std::pair{&diff.modified, &diff.total_modified},
                             std::pair{&diff.deleted, &diff.total_deleted}}) {
    const std::size_t before = list->size();
    std::erase_if(*list, [&](const DiffEntry& entry) { return !filter.shows(entry.path); });
    const std::size_t removed = before - list->size();
    *total -= std::min<std::uint64_t>(*total, removed);
    left_out += removed;
  }
  // Back to the listing's own limits: the entries last in path order go first.
  std::size_t bytes = listed_bytes(diff);
  while (listed_count(diff) > shown.max_entries || bytes > shown.max_listed_bytes) {
    std::vector<DiffEntry>* last = nullptr;
    for (auto* list : {&diff.added, &diff.modified, &diff.deleted}) {
      if (!list->empty() && (last == nullptr || list->back().path > last->back().path)) last = list;
    }
    bytes -= last->back().path.size();
    last->pop_back();
    diff.truncated = true;
  }
  return left_out;
}

}  // namespace capsule::daemon

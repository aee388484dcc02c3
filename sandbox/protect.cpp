// protect_paths: matches the globs by walking the sandbox's tree (bounded, never through symlinks or into
// /proc-like mounts), then binds parents before children so no later mount hides an earlier one.
#include "sandbox/protect.h"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

std::vector<std::string> split(const std::string& path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool match_parts(const std::vector<std::string>& glob, std::size_t g, const std::vector<std::string>& path,
                 std::size_t p) {
  if (g == glob.size()) return p == path.size();
  if (glob[g] == "**") {
    for (std::size_t skip = p; skip <= path.size(); ++skip) {
      if (match_parts(glob, g + 1, path, skip)) return true;
    }
    return false;
  }
  return p < path.size() && fnmatch(glob[g].c_str(), path[p].c_str(), 0) == 0 && match_parts(glob, g + 1, path, p + 1);
}

struct Walk {
  const std::vector<std::vector<std::string>>& globs;
  std::vector<std::string> matches;  // relative to the walk's start
  std::size_t visited = 0;

  bool matches_any(const std::string& relative) const {
    const std::vector<std::string> parts = split(relative);
    return std::any_of(globs.begin(), globs.end(), [&](const auto& glob) { return match_parts(glob, 0, parts, 0); });
  }

  void visit(const std::string& absolute, const std::string& relative, int depth) {
    DIR* dir = opendir(absolute.c_str());
    if (dir == nullptr) return;
    std::vector<std::pair<std::string, bool>> entries;
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      if (++visited > kMaxProtectWalkEntries) {
        closedir(dir);
        throw_error("protect", absolute, "more than " + std::to_string(kMaxProtectWalkEntries) + " entries to match");
      }
      struct stat st;
      if (lstat((absolute + "/" + name).c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) entries.emplace_back(name, S_ISDIR(st.st_mode));
    }
    closedir(dir);
    std::sort(entries.begin(), entries.end());
    for (const auto& [name, is_dir] : entries) {
      const std::string child = relative.empty() ? name : relative + "/" + name;
      if (matches_any(child)) {
        matches.push_back(child);
      } else if (is_dir && depth < 64) {
        visit(absolute + "/" + name, child, depth + 1);
      }
    }
  }
};

void bind_onto_itself(const std::string& path, bool read_only) {
  if (mount(path.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) throw_errno("protect", path, "bind");
  if (read_only && mount(nullptr, path.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                         nullptr) != 0) {
    throw_errno("protect", path, "remount read-only");
  }
}

}  // namespace

bool protect_glob_matches(const std::string& glob, const std::string& path) {
  return match_parts(split(glob), 0, split(path), 0);
}

void protect_paths(const std::string& root, const std::string& base, const std::vector<std::string>& globs) {
  // Absolute globs walk from the root, relative ones from the base: two walks at most.
  std::vector<std::vector<std::string>> relative_globs, absolute_globs;
  for (const std::string& glob : globs) (glob.starts_with("/") ? absolute_globs : relative_globs).push_back(split(glob));
  std::set<std::string> read_only;  // absolute paths inside root
  for (const auto& [start, group] : {std::pair{base, &relative_globs}, std::pair{std::string("/"), &absolute_globs}}) {
    if (group->empty()) continue;
    Walk walk{*group, {}, 0};
    walk.visit(root + (start == "/" ? "" : start), "", 0);
    for (const std::string& match : walk.matches) read_only.insert((start == "/" ? "" : start) + "/" + match);
  }
  // Directories between the base and each match are pinned (bound rw onto themselves); nested matches are
  // covered by the protected directory above them.
  std::set<std::string> pinned;
  std::set<std::string> leaves;
  for (const std::string& path : read_only) {
    std::vector<std::string> parents;
    for (std::size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
      parents.push_back(path.substr(0, slash));
    }
    if (std::any_of(parents.begin(), parents.end(), [&](const std::string& p) { return leaves.count(p) != 0; })) {
      continue;
    }
    leaves.insert(path);
    for (const std::string& parent : parents) {
      if (parent.size() > base.size() || !parent.starts_with(base)) pinned.insert(parent);
    }
  }
  if (pinned.size() + leaves.size() > kMaxProtectedMounts) {
    throw_error("protect", base, std::to_string(pinned.size() + leaves.size()) + " paths to protect, more than " +
                                     std::to_string(kMaxProtectedMounts));
  }
  // std::set orders "a" before "a/b": parents are bound before what lies below them.
  for (const std::string& dir : pinned) bind_onto_itself(root + dir, false);
  for (const std::string& path : leaves) bind_onto_itself(root + path, true);
}

}  // namespace capsule::sandbox

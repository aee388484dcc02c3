// diff_upper: walks the overlay upper directory and looks up only the matching lower paths (never the
// whole lower tree, except below deleted or opaque directories), with lstat and without crossing mounts.
#include "daemon/workspace_diff.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

namespace capsule::daemon {
namespace {

std::string errno_text() { return std::strerror(errno); }

std::string join(const std::string& rel, const std::string& name) { return rel.empty() ? name : rel + "/" + name; }

// lstat; nullopt when the path does not exist.
std::optional<struct stat> lstat_if_exists(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) return st;
  if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
  throw WorkspaceDiffError(path + ": lstat: " + errno_text());
}

struct stat lstat_or_throw(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) throw WorkspaceDiffError(path + ": lstat: " + errno_text());
  return st;
}

// Entry names of a directory, sorted, without "." and "..".
std::vector<std::string> list_dir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) throw WorkspaceDiffError(path + ": opendir: " + errno_text());
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
    errno = 0;
  }
  const int error = errno;
  ::closedir(dir);
  if (error != 0) throw WorkspaceDiffError(path + ": readdir: " + std::strerror(error));
  std::sort(names.begin(), names.end());
  return names;
}

// The value of user.overlay.<name>, else trusted.overlay.<name>; nullopt when neither is set.
std::optional<std::string> overlay_xattr(const std::string& path, const char* name) {
  for (const char* prefix : {"user.overlay.", "trusted.overlay."}) {
    const std::string key = std::string(prefix) + name;
    char value[4096];
    const ssize_t n = ::lgetxattr(path.c_str(), key.c_str(), value, sizeof value);
    if (n >= 0) return std::string(value, static_cast<std::size_t>(n));
    if (errno != ENODATA && errno != ENOTSUP) throw WorkspaceDiffError(path + ": getxattr " + key + ": " + errno_text());
  }
  return std::nullopt;
}

bool is_whiteout(const std::string& path, const struct stat& st) {
  if (S_ISCHR(st.st_mode)) return major(st.st_rdev) == 0 && minor(st.st_rdev) == 0;
  return S_ISREG(st.st_mode) && st.st_size == 0 && overlay_xattr(path, "whiteout").has_value();
}

class Walker {
 public:
  Walker(std::string upper, std::string lower) : upper_root_(std::move(upper)), lower_root_(std::move(lower)) {
    const struct stat upper_st = lstat_or_throw(upper_root_);
    const struct stat lower_st = lstat_or_throw(lower_root_);
    if (!S_ISDIR(upper_st.st_mode)) throw WorkspaceDiffError(upper_root_ + ": not a directory");
    if (!S_ISDIR(lower_st.st_mode)) throw WorkspaceDiffError(lower_root_ + ": not a directory");
    upper_dev_ = upper_st.st_dev;
    lower_dev_ = lower_st.st_dev;
  }

  WorkspaceDiff run() {
    walk_upper("", overlay_xattr(upper_root_, "opaque") == "y", true);
    for (auto* list : {&diff_.added, &diff_.modified, &diff_.deleted}) {
      std::sort(list->begin(), list->end(), [](const DiffEntry& a, const DiffEntry& b) { return a.path < b.path; });
    }
    return std::move(diff_);
  }

 private:
  std::string upper(const std::string& rel) const { return rel.empty() ? upper_root_ : upper_root_ + "/" + rel; }
  std::string lower(const std::string& rel) const { return rel.empty() ? lower_root_ : lower_root_ + "/" + rel; }

  // Walks the upper directory `rel`. `opaque`: lower entries below it are hidden. `lower_is_dir`: lower has
  // a real directory at `rel` (checked with lstat all the way down, so lower lookups never follow a link).
  // Returns the number of entries in the upper directory.
  std::size_t walk_upper(const std::string& rel, bool opaque, bool lower_is_dir) {
    const std::vector<std::string> names = list_dir(upper(rel));
    for (const auto& name : names) {
      const std::string child = join(rel, name);
      const std::string upper_path = upper(child);
      const struct stat st = lstat_or_throw(upper_path);
      const std::optional<struct stat> below = lower_is_dir ? lstat_if_exists(lower(child)) : std::nullopt;
      const bool below_is_dir = below && S_ISDIR(below->st_mode);

      if (is_whiteout(upper_path, st)) {
        if (below) delete_lower(child, *below);
      } else if (S_ISDIR(st.st_mode)) {
        if (st.st_dev != upper_dev_) continue;  // another filesystem mounted here
        if (overlay_xattr(upper_path, "redirect")) {
          throw WorkspaceDiffError(upper_path + ": renamed directory (overlay redirect xattr) is not supported");
        }
        if (below && !below_is_dir) delete_lower(child, *below);  // a file replaced by a directory
        const bool child_opaque = opaque || overlay_xattr(upper_path, "opaque") == "y";
        const bool child_lower_is_dir = below_is_dir && below->st_dev == lower_dev_;
        if (walk_upper(child, child_opaque, child_lower_is_dir) == 0 && !below_is_dir) {
          diff_.added.push_back({child + "/", 0});
        }
      } else {
        if (below_is_dir) delete_lower(child, *below);  // a directory replaced by a file
        DiffEntry entry{child, static_cast<std::uint64_t>(st.st_size)};
        (below && !below_is_dir ? diff_.modified : diff_.added).push_back(std::move(entry));
      }
    }
    if (opaque && lower_is_dir) {
      const std::set<std::string> in_upper(names.begin(), names.end());
      for (const auto& name : list_dir(lower(rel))) {
        if (in_upper.count(name) == 0) delete_lower(join(rel, name), lstat_or_throw(lower(join(rel, name))));
      }
    }
    return names.size();
  }

  // Records the lower path `rel` (and all below it) as deleted.
  void delete_lower(const std::string& rel, const struct stat& st) {
    if (!S_ISDIR(st.st_mode)) {
      diff_.deleted.push_back({rel, static_cast<std::uint64_t>(st.st_size)});
      return;
    }
    if (st.st_dev != lower_dev_) return;  // another filesystem mounted here
    const std::vector<std::string> names = list_dir(lower(rel));
    if (names.empty()) diff_.deleted.push_back({rel + "/", 0});
    for (const auto& name : names) delete_lower(join(rel, name), lstat_or_throw(lower(join(rel, name))));
  }

  std::string upper_root_;
  std::string lower_root_;
  dev_t upper_dev_ = 0;
  dev_t lower_dev_ = 0;
  WorkspaceDiff diff_;
};

nlohmann::json entries_json(const std::vector<DiffEntry>& entries) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& entry : entries) list.push_back({{"path", entry.path}, {"size", entry.size}});
  return list;
}

}  // namespace

nlohmann::json WorkspaceDiff::to_json() const {
  return {{"added", entries_json(added)}, {"modified", entries_json(modified)}, {"deleted", entries_json(deleted)}};
}

WorkspaceDiff diff_upper(const std::string& upper_dir, const std::string& lower_dir) {
  return Walker(upper_dir, lower_dir).run();
}

}  // namespace capsule::daemon

// diff_upper: walks the overlay upper directory through open directory descriptors (openat/fstatat), looks
// up only the matching lower entries, lists within DiffLimits and counts everything; bad entries are errors.
#include "daemon/record/workspace_diff.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "base/error.h"
#include "sandbox/result_json.h"

namespace capsule::daemon {
namespace {

// One entry could not be read: its cause ("openat: Permission denied"); the walk goes on without it.
struct EntryError {
  std::string cause;
};

std::string errno_text(const char* step) { return std::string(step) + ": " + std::strerror(errno); }

std::string join(const std::string& rel, const std::string& name) { return rel.empty() ? name : rel + "/" + name; }

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Fd open_dir_at(int dir_fd, const std::string& name) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw EntryError{errno_text("openat")};
  return Fd(fd);
}

// fstatat without following; nullopt when the entry does not exist.
std::optional<struct stat> stat_at(int dir_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) return st;
  if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
  throw EntryError{errno_text("fstatat")};
}

// Entry names of an open directory, sorted, without "." and "..".
std::vector<std::string> list_names(int dir_fd) {
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) throw EntryError{errno_text("dup")};
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    const std::string cause = errno_text("fdopendir");
    ::close(copy);
    throw EntryError{cause};
  }
  ::rewinddir(dir);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
    errno = 0;
  }
  const int error = errno;
  ::closedir(dir);
  if (error != 0) throw EntryError{std::string("readdir: ") + std::strerror(error)};
  std::sort(names.begin(), names.end());
  return names;
}

// The value of user.overlay.<name>, else trusted.overlay.<name>, of the entry `entry` of an open directory
// (or of the directory itself when `entry` is empty); nullopt when neither is set.
std::optional<std::string> overlay_xattr(int dir_fd, const std::string& entry, const char* name) {
  // A magic /proc/self/fd link is followed only as an intermediate component: a short path at any depth.
  const std::string path = "/proc/self/fd/" + std::to_string(dir_fd) + "/" + (entry.empty() ? "." : entry);
  for (const char* prefix : {"user.overlay.", "trusted.overlay."}) {
    const std::string key = std::string(prefix) + name;
    char value[4096];
    const ssize_t n = ::lgetxattr(path.c_str(), key.c_str(), value, sizeof value);
    if (n >= 0) return std::string(value, static_cast<std::size_t>(n));
    if (errno != ENODATA && errno != ENOTSUP) throw EntryError{errno_text(("getxattr " + key).c_str())};
  }
  return std::nullopt;
}

bool is_whiteout(int dir_fd, const std::string& name, const struct stat& st) {
  if (S_ISCHR(st.st_mode)) return major(st.st_rdev) == 0 && minor(st.st_rdev) == 0;
  return S_ISREG(st.st_mode) && st.st_size == 0 && overlay_xattr(dir_fd, name, "whiteout").has_value();
}

dev_t directory_device(int fd, const std::string& shown) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) base::throw_errno("fstat", shown);
  if (!S_ISDIR(st.st_mode)) base::throw_error("diff", shown, "not a directory");
  return st.st_dev;
}

class Walker {
 public:
  Walker(int upper_fd, int lower_fd, const DiffLimits& limits)
      : limits_(limits), upper_fd_(open_diff_root(upper_fd)), lower_fd_(open_diff_root(lower_fd)) {
    upper_dev_ = directory_device(upper_fd_.get(), "the upper root");
    lower_dev_ = directory_device(lower_fd_.get(), "the lower root");
  }

  WorkspaceDiff run() {
    try {
      const bool opaque = overlay_xattr(upper_fd_.get(), "", "opaque") == "y";
      walk_upper(upper_fd_.get(), lower_fd_.get(), "", opaque, 0);
    } catch (const EntryError& e) {
      error(".", e.cause);
    }
    for (auto* list : {&diff_.added, &diff_.modified, &diff_.deleted}) {
      std::sort(list->begin(), list->end(), [](const DiffEntry& a, const DiffEntry& b) { return a.path < b.path; });
    }
    return std::move(diff_);
  }

 private:
  // Walks the upper directory `rel` (open as upper_fd). lower_fd: lower's real directory at `rel` on the
  // lower root's filesystem, or -1. `opaque`: lower entries below it are hidden. Returns its entry count.
  std::size_t walk_upper(int upper_fd, int lower_fd, const std::string& rel, bool opaque, std::size_t depth) {
    const std::vector<std::string> names = list_names(upper_fd);
    for (const auto& name : names) {
      const std::string child = join(rel, name);
      try {
        visit_upper(upper_fd, lower_fd, name, child, opaque, depth);
      } catch (const EntryError& e) {
        error(child, e.cause);
      }
    }
    if (opaque && lower_fd >= 0) {
      const std::set<std::string> in_upper(names.begin(), names.end());
      for (const auto& name : list_names(lower_fd)) {
        if (in_upper.count(name) != 0) continue;
        try {
          if (auto st = stat_at(lower_fd, name)) delete_lower(lower_fd, name, join(rel, name), *st, depth + 1);
        } catch (const EntryError& e) {
          error(join(rel, name), e.cause);
        }
      }
    }
    return names.size();
  }

  void visit_upper(int upper_fd, int lower_fd, const std::string& name, const std::string& child, bool opaque,
                   std::size_t depth) {
    const std::optional<struct stat> st = stat_at(upper_fd, name);
    if (!st) return;  // gone meanwhile
    const std::optional<struct stat> below = lower_fd >= 0 ? stat_at(lower_fd, name) : std::nullopt;
    const bool below_is_dir = below && S_ISDIR(below->st_mode);

    if (is_whiteout(upper_fd, name, *st)) {
      if (below) delete_lower(lower_fd, name, child, *below, depth + 1);
    } else if (S_ISDIR(st->st_mode)) {
      if (st->st_dev != upper_dev_) return;  // another filesystem mounted here
      if (depth + 1 > limits_.max_depth) {
        throw EntryError{"deeper than " + std::to_string(limits_.max_depth) + " directories; not walked"};
      }
      const Fd child_fd = open_dir_at(upper_fd, name);
      if (overlay_xattr(child_fd.get(), "", "redirect")) {
        throw EntryError{"renamed directory (overlay redirect xattr) is not supported"};
      }
      if (below && !below_is_dir) delete_lower(lower_fd, name, child, *below, depth + 1);  // file -> directory
      const bool child_opaque = opaque || overlay_xattr(child_fd.get(), "", "opaque") == "y";
      Fd child_lower;
      if (below_is_dir && below->st_dev == lower_dev_) child_lower = open_dir_at(lower_fd, name);
      if (walk_upper(child_fd.get(), child_lower.get(), child, child_opaque, depth + 1) == 0 && !below_is_dir) {
        add(diff_.added, diff_.total_added, child + "/", 0);
      }
    } else {
      if (below_is_dir) delete_lower(lower_fd, name, child, *below, depth + 1);  // directory -> file
      if (below && !below_is_dir) add(diff_.modified, diff_.total_modified, child, st->st_size);
      else add(diff_.added, diff_.total_added, child, st->st_size);
    }
  }

  // Records the lower entry `name` of parent_fd (at `rel`), and all below it, as deleted.
  void delete_lower(int parent_fd, const std::string& name, const std::string& rel, const struct stat& st,
                    std::size_t depth) {
    if (!S_ISDIR(st.st_mode)) {
      add(diff_.deleted, diff_.total_deleted, rel, st.st_size);
      return;
    }
    if (st.st_dev != lower_dev_) return;  // another filesystem mounted here
    if (depth > limits_.max_depth) {
      throw EntryError{"deeper than " + std::to_string(limits_.max_depth) + " directories; not walked"};
    }
    const Fd fd = open_dir_at(parent_fd, name);
    const std::vector<std::string> names = list_names(fd.get());
    if (names.empty()) add(diff_.deleted, diff_.total_deleted, rel + "/", 0);
    for (const auto& child : names) {
      try {
        if (auto child_st = stat_at(fd.get(), child)) delete_lower(fd.get(), child, join(rel, child), *child_st, depth + 1);
      } catch (const EntryError& e) {
        error(join(rel, child), e.cause);
      }
    }
  }

  std::string listed_path(const std::string& rel) {
    if (rel.size() <= limits_.max_path_bytes) return rel;
    diff_.truncated = true;
    return rel.substr(0, limits_.max_path_bytes) + "...";
  }

  void add(std::vector<DiffEntry>& list, std::uint64_t& total, const std::string& rel, off_t size) {
    ++total;
    const std::size_t listed = diff_.added.size() + diff_.modified.size() + diff_.deleted.size();
    const std::size_t length = std::min(rel.size(), limits_.max_path_bytes + 3);
    if (listed >= limits_.max_entries || listed_bytes_ + length > limits_.max_listed_bytes) {
      diff_.truncated = true;
      return;
    }
    listed_bytes_ += length;
    list.push_back({listed_path(rel), static_cast<std::uint64_t>(size)});
  }

  void error(const std::string& rel, const std::string& cause) {
    diff_.truncated = true;
    ++diff_.error_count;
    if (diff_.errors.size() < limits_.max_errors) diff_.errors.push_back(listed_path(rel) + ": " + cause);
  }

  DiffLimits limits_;
  base::UniqueFd upper_fd_;
  base::UniqueFd lower_fd_;
  dev_t upper_dev_ = 0;
  dev_t lower_dev_ = 0;
  std::size_t listed_bytes_ = 0;
  WorkspaceDiff diff_;
};

nlohmann::json entries_json(const std::vector<DiffEntry>& entries) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& entry : entries) {
    list.push_back({{"path", sandbox::to_valid_utf8(entry.path)}, {"size", entry.size}});
  }
  return list;
}

}  // namespace

nlohmann::json WorkspaceDiff::to_json() const {
  nlohmann::json j = {{"added", entries_json(added)},
                      {"modified", entries_json(modified)},
                      {"deleted", entries_json(deleted)},
                      {"truncated", truncated},
                      {"totals", {{"added", total_added}, {"modified", total_modified}, {"deleted", total_deleted}}}};
  if (error_count > 0) {
    nlohmann::json listed = nlohmann::json::array();
    for (const auto& text : errors) listed.push_back(sandbox::to_valid_utf8(text));
    j["errors"] = std::move(listed);
    j["error_count"] = error_count;
  }
  return j;
}

base::UniqueFd open_diff_root(const std::string& dir) {
  base::UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) base::throw_errno("open", dir, "diff root");
  return fd;
}

base::UniqueFd open_diff_root(int dir_fd) {
  base::UniqueFd fd(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) base::throw_errno("open", "descriptor " + std::to_string(dir_fd), "diff root");
  return fd;
}

WorkspaceDiff diff_upper(const std::string& upper_dir, const std::string& lower_dir, const DiffLimits& limits) {
  const base::UniqueFd upper = open_diff_root(upper_dir);
  const base::UniqueFd lower = open_diff_root(lower_dir);
  return diff_upper(upper.get(), lower.get(), limits);
}

WorkspaceDiff diff_upper(int upper_fd, int lower_fd, const DiffLimits& limits) {
  return Walker(upper_fd, lower_fd, limits).run();
}

}  // namespace capsule::daemon

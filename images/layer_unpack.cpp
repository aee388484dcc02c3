// Layer unpacking: every entry is created relative to directory descriptors opened one component at a
// time with O_NOFOLLOW, so nothing the layer itself creates (a symlink) can redirect a later write.
#include "images/layer_unpack.h"

#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "images/error.h"
#include "base/file_util.h"
#include "images/tar_stream.h"

namespace capsule::images {
namespace fs = std::filesystem;
namespace {

constexpr const char* kUnpackStep = "unpack";
constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kMetaPrefix = ".wh..wh.";
constexpr std::string_view kOpaqueMarker = ".wh..wh..opq";

using Parts = std::vector<std::string>;

std::string join(const Parts& parts, std::size_t count) {
  std::string path;
  for (std::size_t i = 0; i < count; ++i) path += (i ? "/" : "") + parts[i];
  return path;
}

// An archive path as components: "." and empty parts dropped; absolute paths and ".." refused.
Parts split_path(const char* raw, const std::string& what) {
  if (raw == nullptr) throw_image_error(kUnpackStep, "", what + " path is missing or not convertible");
  const std::string_view path(raw);
  if (!path.empty() && path.front() == '/') throw_image_error(kUnpackStep, std::string(path), what + " is an absolute path");
  Parts parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part == "..") throw_image_error(kUnpackStep, std::string(path), what + " has a '..' component");
    if (!part.empty() && part != ".") parts.emplace_back(part);
    start = end + 1;
  }
  return parts;
}

// Removes `name` under dir_fd and, for a directory, everything in it (never following symlinks).
void remove_tree_at(int dir_fd, const std::string& name) {
  int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) throw_image_errno(kUnpackStep, name, "replace");
    return;
  }
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    throw_image_errno(kUnpackStep, name, "replace: open directory");
  }
  std::unique_ptr<DIR, int (*)(DIR*)> owned(dir, closedir);
  std::vector<std::string> children;
  while (dirent* entry = readdir(dir)) {
    const std::string child = entry->d_name;
    if (child != "." && child != "..") children.push_back(child);
  }
  for (const auto& child : children) remove_tree_at(dirfd(dir), child);
  if (unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0) throw_image_errno(kUnpackStep, name, "replace: remove directory");
}

bool is_overlay_xattr(std::string_view name) {
  return name.rfind("trusted.overlay.", 0) == 0 || name.rfind("user.overlay.", 0) == 0;
}

// Applies the entries of one tar to the directory behind root_fd.
class LayerWriter {
 public:
  LayerWriter(int root_fd, const UnpackLimits& limits) : root_fd_(root_fd), limits_(limits) {}

  void apply(TarStream& stream, struct archive_entry* entry) {
    if (++entries_ > limits_.max_entries) {
      throw_image_error(kUnpackStep, "", "more than " + std::to_string(limits_.max_entries) + " entries");
    }
    const char* raw_path = archive_entry_pathname(entry);
    if (raw_path == nullptr) raw_path = archive_entry_pathname_utf8(entry);
    const Parts parts = split_path(raw_path, "entry");
    const std::string shown = join(parts, parts.size());

    if (parts.size() > 1 && parts[0].rfind(kMetaPrefix, 0) == 0) return;  // aufs metadata dirs (.wh..wh.plnk)
    if (const char* link = archive_entry_hardlink(entry)) return hard_link(parts, shown, link);
    const mode_t type = archive_entry_filetype(entry);
    if (parts.empty()) {
      if (type != AE_IFDIR) throw_image_error(kUnpackStep, raw_path, "a non-directory entry names the layer root");
      return directory(root_fd_, "", parts, entry);
    }
    const std::string& name = parts.back();
    base::UniqueFd parent = open_parent(parts, parts.size() - 1, true);

    if (name == kOpaqueMarker) return mark_opaque(parent.get(), join(parts, parts.size() - 1));
    if (name.rfind(kMetaPrefix, 0) == 0) return;  // aufs bookkeeping (.wh..wh.plnk and the like)
    if (name.rfind(kWhiteoutPrefix, 0) == 0) return whiteout(parent.get(), name.substr(kWhiteoutPrefix.size()), shown);

    switch (type) {
      case AE_IFREG: return regular_file(stream, parent.get(), name, shown, entry);
      case AE_IFDIR: return directory(parent.get(), name, parts, entry);
      case AE_IFLNK: return symlink_entry(parent.get(), name, shown, entry);
      case AE_IFCHR:
      case AE_IFBLK: throw_image_error(kUnpackStep, shown, "device nodes are not allowed in a layer");
      case AE_IFIFO: throw_image_error(kUnpackStep, shown, "fifos are not allowed in a layer");
      case AE_IFSOCK: throw_image_error(kUnpackStep, shown, "sockets are not allowed in a layer");
      default: throw_image_error(kUnpackStep, shown, "unsupported entry type " + std::to_string(type));
    }
  }

  // Directory mtimes last: creating entries inside a directory changes its mtime.
  void finish() {
    for (const auto& [parts, time] : dir_times_) {
      base::UniqueFd dir;
      try {
        dir = open_parent(parts, parts.size(), false);
      } catch (const base::Error&) {
        continue;  // a later entry replaced this directory
      }
      const struct timespec times[2] = {time, time};
      if (futimens(dir.get(), times) != 0) throw_image_errno(kUnpackStep, join(parts, parts.size()), "set mtime");
    }
  }

 private:
  // Opens the directory made of the first `count` components, one component at a time, never following a
  // symlink; with `create`, missing directories are made (0755, root-owned) as tar allows.
  base::UniqueFd open_parent(const Parts& parts, std::size_t count, bool create) {
    base::UniqueFd dir(dup(root_fd_));
    if (!dir) throw_image_errno(kUnpackStep, "", "dup");
    for (std::size_t i = 0; i < count; ++i) {
      const char* name = parts[i].c_str();
      int fd = openat(dir.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(dir.get(), name, 0755) != 0 && errno != EEXIST) {
          throw_image_errno(kUnpackStep, join(parts, i + 1), "create parent directory");
        }
        fd = openat(dir.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      }
      if (fd < 0) {
        const int saved = errno;
        struct stat st;
        if (fstatat(dir.get(), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
          throw_image_error(kUnpackStep, join(parts, parts.size()),
                            "writes through the symlink " + join(parts, i + 1) + " (refused)");
        }
        errno = saved;
        throw_image_errno(kUnpackStep, join(parts, i + 1), "open parent directory");
      }
      dir.reset(fd);
    }
    return dir;
  }

  // Makes room for a new entry `name`; an existing directory is kept when keep_directory is set.
  // Returns true when a directory was kept.
  static bool clear_slot(int parent_fd, const std::string& name, bool keep_directory) {
    struct stat st;
    if (fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    if (S_ISDIR(st.st_mode) && keep_directory) return true;
    remove_tree_at(parent_fd, name);
    return false;
  }

  static void set_xattrs(int fd, struct archive_entry* entry, const std::string& shown) {
    const char* name = nullptr;
    const void* value = nullptr;
    std::size_t size = 0;
    archive_entry_xattr_reset(entry);
    while (archive_entry_xattr_next(entry, &name, &value, &size) == ARCHIVE_OK) {
      if (is_overlay_xattr(name)) throw_image_error(kUnpackStep, shown, std::string("sets the overlayfs xattr ") + name);
      if (fsetxattr(fd, name, value, size, 0) != 0) {
        if (errno == ENOTSUP) continue;  // the store's filesystem has no such namespace: nothing to keep it in
        throw_image_errno(kUnpackStep, shown, std::string("set xattr ") + name);
      }
    }
  }

  static void set_owner_and_mode(int fd, struct archive_entry* entry, const std::string& shown) {
    const la_int64_t uid = archive_entry_uid(entry);
    const la_int64_t gid = archive_entry_gid(entry);
    if (uid < 0 || gid < 0 || uid >= 0xffffffffLL || gid >= 0xffffffffLL) {
      throw_image_error(kUnpackStep, shown, "invalid uid/gid " + std::to_string(uid) + ":" + std::to_string(gid));
    }
    // chown before chmod: chown clears the setuid and setgid bits.
    if (fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) throw_image_errno(kUnpackStep, shown, "chown");
    if (fchmod(fd, archive_entry_perm(entry) & 07777) != 0) throw_image_errno(kUnpackStep, shown, "chmod");
  }

  struct timespec mtime_of(struct archive_entry* entry) const {
    struct timespec time {};
    if (limits_.mtime) {
      time.tv_sec = static_cast<time_t>(*limits_.mtime);
    } else if (archive_entry_mtime_is_set(entry)) {
      time.tv_sec = archive_entry_mtime(entry);
      time.tv_nsec = archive_entry_mtime_nsec(entry);
    }
    return time;
  }

  void regular_file(TarStream& stream, int parent_fd, const std::string& name, const std::string& shown,
                    struct archive_entry* entry) {
    const la_int64_t declared = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : 0;
    if (declared < 0 || static_cast<std::uint64_t>(declared) > limits_.max_file_bytes) {
      throw_image_error(kUnpackStep, shown,
                        "file of " + std::to_string(declared) + " bytes exceeds the per-file limit of " +
                            std::to_string(limits_.max_file_bytes));
    }
    clear_slot(parent_fd, name, false);
    int raw_fd = openat(parent_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (raw_fd < 0) throw_image_errno(kUnpackStep, shown, "create file");
    base::UniqueFd fd(raw_fd);
    for (;;) {
      const void* data = nullptr;
      std::size_t size = 0;
      la_int64_t offset = 0;
      const int status = archive_read_data_block(stream.tar(), &data, &size, &offset);
      if (status == ARCHIVE_EOF) break;
      if (status < ARCHIVE_WARN) stream.fail("data of " + shown);
      if (offset < 0 || static_cast<std::uint64_t>(offset) + size > limits_.max_file_bytes) {
        throw_image_error(kUnpackStep, shown, "file data exceeds the per-file limit of " +
                                            std::to_string(limits_.max_file_bytes) + " bytes");
      }
      const char* bytes = static_cast<const char*>(data);
      while (size > 0) {  // sparse files arrive as blocks at offsets; holes stay holes
        ssize_t n = pwrite(fd.get(), bytes, size, offset);
        if (n < 0) {
          if (errno == EINTR) continue;
          throw_image_errno(kUnpackStep, shown, "write");
        }
        bytes += n;
        offset += n;
        size -= static_cast<std::size_t>(n);
      }
    }
    if (ftruncate(fd.get(), declared) != 0) throw_image_errno(kUnpackStep, shown, "set size");
    set_owner_and_mode(fd.get(), entry, shown);
    set_xattrs(fd.get(), entry, shown);
    const struct timespec time = mtime_of(entry);
    const struct timespec times[2] = {time, time};
    if (futimens(fd.get(), times) != 0) throw_image_errno(kUnpackStep, shown, "set mtime");
  }

  void directory(int parent_fd, const std::string& name, const Parts& parts, struct archive_entry* entry) {
    const std::string shown = parts.empty() ? "." : join(parts, parts.size());
    base::UniqueFd dir;
    if (parts.empty()) {
      dir.reset(dup(root_fd_));
    } else {
      if (!clear_slot(parent_fd, name, true) && mkdirat(parent_fd, name.c_str(), 0700) != 0) {
        throw_image_errno(kUnpackStep, shown, "create directory");
      }
      dir.reset(openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (!dir) throw_image_errno(kUnpackStep, shown, "open directory");
    set_owner_and_mode(dir.get(), entry, shown);
    set_xattrs(dir.get(), entry, shown);
    dir_times_.emplace_back(parts, mtime_of(entry));
  }

  void symlink_entry(int parent_fd, const std::string& name, const std::string& shown, struct archive_entry* entry) {
    const char* target = archive_entry_symlink(entry);
    if (target == nullptr) target = archive_entry_symlink_utf8(entry);
    if (target == nullptr || *target == '\0') throw_image_error(kUnpackStep, shown, "symlink without a target");
    clear_slot(parent_fd, name, false);
    if (symlinkat(target, parent_fd, name.c_str()) != 0) throw_image_errno(kUnpackStep, shown, "create symlink");
    const la_int64_t uid = archive_entry_uid(entry);
    const la_int64_t gid = archive_entry_gid(entry);
    if (uid < 0 || gid < 0 || uid >= 0xffffffffLL || gid >= 0xffffffffLL) {
      throw_image_error(kUnpackStep, shown, "invalid uid/gid " + std::to_string(uid) + ":" + std::to_string(gid));
    }
    if (fchownat(parent_fd, name.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(gid), AT_SYMLINK_NOFOLLOW) != 0) {
      throw_image_errno(kUnpackStep, shown, "lchown");
    }
    const struct timespec time = mtime_of(entry);
    const struct timespec times[2] = {time, time};
    if (utimensat(parent_fd, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) throw_image_errno(kUnpackStep, shown, "set mtime");
  }

  void hard_link(const Parts& parts, const std::string& shown, const char* link) {
    const Parts target = split_path(link, "hard link target of " + shown);
    const std::string target_shown = join(target, target.size());
    if (parts.empty() || target.empty()) throw_image_error(kUnpackStep, shown, "hard link to or from the layer root");
    if (parts == target) throw_image_error(kUnpackStep, shown, "hard link to itself");
    base::UniqueFd target_dir;
    try {
      target_dir = open_parent(target, target.size() - 1, false);
    } catch (const base::Error& e) {
      if (e.cause().errno_value != ENOENT) throw;
      throw_image_error(kUnpackStep, shown, "hard link target " + target_shown + " is not in this layer");
    }
    struct stat st;
    if (fstatat(target_dir.get(), target.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      throw_image_error(kUnpackStep, shown, "hard link target " + target_shown + " is not in this layer");
    }
    if (!S_ISREG(st.st_mode)) {
      throw_image_error(kUnpackStep, shown, "hard link target " + target_shown + " is not a regular file");
    }
    base::UniqueFd parent = open_parent(parts, parts.size() - 1, true);
    const std::string& name = parts.back();
    if (name.rfind(kWhiteoutPrefix, 0) == 0) throw_image_error(kUnpackStep, shown, "a whiteout cannot be a hard link");
    clear_slot(parent.get(), name, false);
    if (linkat(target_dir.get(), target.back().c_str(), parent.get(), name.c_str(), 0) != 0) {
      throw_image_errno(kUnpackStep, shown, "hard link to " + target_shown);
    }
  }

  static void whiteout(int parent_fd, const std::string& hidden, const std::string& shown) {
    if (hidden.empty() || hidden == "." || hidden == "..") throw_image_error(kUnpackStep, shown, "malformed whiteout");
    clear_slot(parent_fd, hidden, false);
    if (mknodat(parent_fd, hidden.c_str(), S_IFCHR | 0, makedev(0, 0)) != 0) {
      throw_image_errno(kUnpackStep, shown, "create overlayfs whiteout (0:0 character device)");
    }
  }

  static void mark_opaque(int dir_fd, const std::string& shown) {
    for (const char* name : {"trusted.overlay.opaque", "user.overlay.opaque"}) {
      if (fsetxattr(dir_fd, name, "y", 1, 0) != 0) {
        throw_image_errno(kUnpackStep, shown.empty() ? "." : shown, std::string("mark opaque (") + name + ")");
      }
    }
  }

  int root_fd_;
  const UnpackLimits& limits_;
  std::uint64_t entries_ = 0;
  std::vector<std::pair<Parts, struct timespec>> dir_times_;
};

}  // namespace

UnpackResult unpack_layer(const fs::path& blob, const fs::path& target, const UnpackLimits& limits,
                          const std::optional<store::Digest>& expected_diff_id) {
  struct stat st;
  if (lstat(target.c_str(), &st) == 0) throw_image_error(kUnpackStep, target.string(), "target already exists");
  const std::string name = target.filename().string();  // a named string: "." + a temporary trips GCC 12 -O3 -Wrestrict
  const fs::path temp = base::make_temp_dir(target.parent_path(), "." + name + ".unpack-", kUnpackStep);
  try {
    if (chmod(temp.c_str(), 0755) != 0) throw_image_errno(kUnpackStep, temp.string(), "chmod");
    base::UniqueFd root = base::open_directory(temp, kUnpackStep);
    TarStream stream(blob, StreamLimits{limits.max_total_bytes, limits.max_ratio, limits.ratio_floor_bytes}, kUnpackStep);
    LayerWriter writer(root.get(), limits);
    UnpackResult result;
    for (;;) {
      struct archive_entry* entry = nullptr;
      const int status = archive_read_next_header(stream.tar(), &entry);
      if (status == ARCHIVE_EOF) break;
      if (status < ARCHIVE_WARN) stream.fail("read entry header");
      try {
        writer.apply(stream, entry);
      } catch (const base::Error& e) {
        if (e.cause().path == blob.string()) throw;  // a stream error already names the layer
        throw ImageError(kUnpackStep, e.cause().path, e.cause().detail + " [in layer " + blob.string() + "]", e.cause().errno_value);
      }
      ++result.entries;
    }
    writer.finish();
    if (limits.mtime) {  // the root too, which a tar of a directory's contents has no entry for
      const struct timespec time = {static_cast<time_t>(*limits.mtime), 0};
      const struct timespec times[2] = {time, time};
      if (futimens(root.get(), times) != 0) throw_image_errno(kUnpackStep, temp.string(), "set mtime");
    }
    result.diff_id = stream.finish();
    result.unpacked_bytes = stream.bytes();
    if (expected_diff_id && result.diff_id != *expected_diff_id) {
      throw_image_error(kUnpackStep, blob.string(),
                        "uncompressed content is " + result.diff_id.str() + ", the image config says " +
                            expected_diff_id->str());
    }
    if (limits.sync && syncfs(root.get()) != 0) throw_image_errno(kUnpackStep, temp.string(), "syncfs");
    if (rename(temp.c_str(), target.c_str()) != 0) throw_image_errno(kUnpackStep, target.string(), "rename into place");
    return result;
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    throw;
  }
}

}  // namespace capsule::images

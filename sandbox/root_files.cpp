// Opens, directory creation and replace-by-rename writes that resolve only inside a sandbox's root (openat2
// RESOLVE_IN_ROOT) or only beneath a directory without symlinks (archive entries): nothing reaches the host.
#include "sandbox/root_files.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/capability.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <linux/securebits.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <vector>

#include "base/error.h"
#include "base/file_util.h"
#include "sandbox/scratch.h"

namespace capsule::sandbox {
namespace {

constexpr const char* kFilesStep = "files";
constexpr mode_t kDirMode = 0755;
// openat2 RESOLVE_IN_ROOT answers EAGAIN when a rename or mount anywhere raced with a ".." in a symlink.
constexpr int kAgainRetries = 32;

// Where relative names resolve: inside a root (symlinks followed, clamped to it), or beneath a directory
// with no symlink followed at all.
struct Scope {
  int fd;
  std::uint64_t resolve;
};

Scope in_root(int root_fd) { return {root_fd, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS}; }
Scope beneath(int dir_fd) { return {dir_fd, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS}; }

// A caller's path as errors show it: bounded, so a 4 KiB path does not make a 4 KiB message.
std::string shown(std::string_view path) {
  constexpr std::size_t kShown = 256;
  return path.size() <= kShown ? std::string(path) : std::string(path.substr(0, kShown)) + "...";
}

std::string shown_in_root(const std::string& relative) { return relative == "." ? "/" : "/" + relative; }

[[noreturn]] void invalid_path(std::string_view path, const std::string& why) {
  throw base::Error("invalid_path", "invalid path \"" + shown(path) + "\": " + why);
}

// The stable code for an errno met while resolving or changing `shown`.
std::string code_for(int error) {
  switch (error) {
    case ENOENT:
      return "not_found";
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENXIO:
      return "not_a_file";
    case ENAMETOOLONG:
    case EXDEV:
      return "invalid_path";
    case ENOSPC:
    case EDQUOT:
      return "insufficient_storage";
    case EROFS:
    case EPERM:
    case EACCES:
      return "forbidden";
    case EAGAIN:
    case EBUSY:
      return "conflict";
    default:
      return "internal_error";
  }
}

[[noreturn]] void fail(const std::string& shown_path, int error, const std::string& doing) {
  std::string detail = doing;
  if (error == ELOOP) detail += ": a symlink is in the way (a loop, a magic link, or one that may not be followed)";
  throw base::Error(base::Cause{kFilesStep, shown_path, error, detail}, code_for(error));
}

// A write into a box that did not reach its disk. ENOSPC / EDQUOT: the box's disk is full; EIO: its image could
// not be written (the host filesystem under it is full, or failing): either way nothing was stored, 507.
[[noreturn]] void fail_storing(const std::string& shown_path, int error, const std::string& doing) {
  if (error != EIO) fail(shown_path, error, doing);
  throw base::Error(base::Cause{kFilesStep, shown_path, error, doing + ": the box's disk could not store it"},
                    "insufficient_storage");
}

[[noreturn]] void fail_with(const std::string& shown_path, const std::string& code, const std::string& why) {
  throw base::Error(base::Cause{kFilesStep, shown_path, 0, why}, code);
}

std::vector<std::string_view> components(std::string_view relative) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (start <= relative.size()) {
    std::size_t end = relative.find('/', start);
    if (end == std::string_view::npos) end = relative.size();
    const std::string_view part = relative.substr(start, end - start);
    if (!part.empty() && part != ".") parts.push_back(part);
    start = end + 1;
  }
  return parts;
}

// openat2 under `scope`; -1 with errno set on failure (after EAGAIN / EINTR retries).
int try_open(const Scope& scope, const std::string& relative, std::uint64_t flags) {
  struct open_how how {};
  how.flags = flags | O_CLOEXEC;
  how.resolve = scope.resolve;
  for (int attempt = 0;; ++attempt) {
    const long fd = syscall(SYS_openat2, scope.fd, relative.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno == EINTR || (errno == EAGAIN && attempt < kAgainRetries)) continue;
    return -1;
  }
}

base::UniqueFd open_in(const Scope& scope, const std::string& relative, std::uint64_t flags,
                       const std::string& shown_path) {
  base::UniqueFd fd(try_open(scope, relative, flags));
  if (!fd) fail(shown_path, errno, "open");
  return fd;
}

struct stat stat_fd(int fd, const std::string& shown_path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) fail(shown_path, errno, "stat");
  return st;
}

void refuse_kernel_filesystem(int fd, const std::string& shown_path) {
  if (is_kernel_filesystem(fd)) fail_with(shown_path, "forbidden", "on a kernel filesystem (proc, sysfs, cgroup, ...)");
}

// A new, unused name in a directory for what is renamed over the target once complete.
std::string temporary_name() { return ".capsule-" + new_sandbox_id() + ".part"; }

// Removes the temporary name unless the rename took it.
class TemporaryName {
 public:
  TemporaryName(int dir_fd, std::string name) : dir_fd_(dir_fd), name_(std::move(name)) {}
  ~TemporaryName() {
    if (!name_.empty()) unlinkat(dir_fd_, name_.c_str(), 0);
  }
  TemporaryName(const TemporaryName&) = delete;
  TemporaryName& operator=(const TemporaryName&) = delete;

  const std::string& name() const { return name_; }
  void rename_to(const std::string& target, const std::string& shown_path) {
    if (renameat(dir_fd_, name_.c_str(), dir_fd_, target.c_str()) != 0) fail(shown_path, errno, "rename into place");
    name_.clear();
  }

 private:
  int dir_fd_;
  std::string name_;
};

// The directory `relative` under `scope` (O_RDONLY | O_DIRECTORY), its missing components created 0755 and
// owned by `owner`, each directory checked not to be on a kernel filesystem before anything is made in it.
base::UniqueFd open_dirs(const Scope& scope, const std::string& relative, const RootOwner& owner,
                         const std::string& shown_path) {
  constexpr std::uint64_t kDirFlags = O_RDONLY | O_DIRECTORY;
  if (base::UniqueFd whole(try_open(scope, relative, kDirFlags)); whole) {
    refuse_kernel_filesystem(whole.get(), shown_path);
    return whole;
  }
  if (errno != ENOENT) fail(shown_path, errno, "open directory");

  base::UniqueFd dir = open_in(scope, ".", kDirFlags, shown_path);
  std::string prefix;
  for (const std::string_view part : components(relative)) {
    const std::string name(part);
    prefix = prefix.empty() ? name : prefix + "/" + name;
    base::UniqueFd next(try_open(scope, prefix, kDirFlags));
    if (!next && errno != ENOENT) fail(shown_path, errno, "open directory");
    if (!next) {
      refuse_kernel_filesystem(dir.get(), shown_path);
      if (mkdirat(dir.get(), name.c_str(), 0700) != 0) {
        if (errno != EEXIST) fail(shown_path, errno, "create directory");
        next = open_in(scope, prefix, kDirFlags, shown_path);  // made meanwhile, or a dangling symlink: ENOENT
      } else {
        // Exactly the directory just made (a symlink swapped in since is refused), then owned and opened up.
        next = open_in(beneath(dir.get()), name, kDirFlags, shown_path);
        if (fchown(next.get(), owner.uid, owner.gid) != 0) fail(shown_path, errno, "chown directory");
        if (fchmod(next.get(), kDirMode) != 0) fail(shown_path, errno, "chmod directory");
      }
    }
    dir = std::move(next);
  }
  refuse_kernel_filesystem(dir.get(), shown_path);
  return dir;
}

// `relative` split into its directory ("." for none) and last name; "." itself has no last name.
std::pair<std::string, std::string> split_last(const std::string& relative, const std::string& shown_path) {
  if (relative == ".") fail_with(shown_path, "not_a_file", "the root is a directory");
  const std::size_t slash = relative.rfind('/');
  if (slash == std::string::npos) return {".", relative};
  return {relative.substr(0, slash), relative.substr(slash + 1)};
}

std::uint64_t write_in(const Scope& scope, const std::string& relative, const std::string& shown_path,
                       const ByteReader& source, unsigned mode, const RootOwner& owner, std::uint64_t limit_bytes,
                       std::optional<struct timespec> mtime) {
  const auto [parent, name] = split_last(relative, shown_path);
  const base::UniqueFd dir = open_dirs(scope, parent, owner, shown_path);
  TemporaryName temporary(dir.get(), temporary_name());
  const base::UniqueFd file(
      openat(dir.get(), temporary.name().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file) fail(shown_path, errno, "create");

  std::uint64_t written = 0;
  for (std::string_view chunk = source(); !chunk.empty(); chunk = source()) {
    if (chunk.size() > limit_bytes - written) {
      fail_with(shown_path, "payload_too_large", "more than " + std::to_string(limit_bytes) + " bytes");
    }
    try {
      base::write_all(file.get(), chunk.data(), chunk.size(), kFilesStep, shown_path);
    } catch (const base::Error& error) {
      fail_storing(shown_path, error.cause().errno_value, "write");
    }
    written += chunk.size();
  }
  if (fchown(file.get(), owner.uid, owner.gid) != 0) fail(shown_path, errno, "chown");
  if (fchmod(file.get(), mode & 0777) != 0) fail(shown_path, errno, "chmod");
  if (mtime) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, *mtime};
    if (futimens(file.get(), times) != 0) fail(shown_path, errno, "set mtime");
  }
  // Written back before it takes the name: a box's disk is a sparse image whose blocks the host filesystem
  // gives out only now, and a write the host cannot store must fail this call, not a later writeback.
  if (fsync(file.get()) != 0) fail_storing(shown_path, errno, "sync");
  temporary.rename_to(name, shown_path);
  return written;
}

}  // namespace

bool is_kernel_filesystem(int fd) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return true;  // unknown: treated as the refusing answer
  switch (static_cast<unsigned long>(fs.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case SELINUX_MAGIC:
    case SMACK_MAGIC:
    case BPF_FS_MAGIC:
    case PSTOREFS_MAGIC:
    case EFIVARFS_MAGIC:
    case DEVPTS_SUPER_MAGIC:
    case BINFMTFS_MAGIC:
    case RDTGROUP_SUPER_MAGIC:
    case NSFS_MAGIC:
      return true;
    default:
      return false;
  }
}

std::string normalize_sandbox_path(std::string_view path) {
  if (path.empty()) invalid_path(path, "empty");
  if (path.find('\0') != std::string_view::npos) invalid_path(path, "contains a NUL byte");
  if (path.size() >= PATH_MAX) invalid_path(path, "longer than " + std::to_string(PATH_MAX - 1) + " bytes");
  std::string normal;
  for (const std::string_view part : components(path)) {
    if (part == "..") invalid_path(path, "\"..\" is not allowed");
    if (part.size() > NAME_MAX) invalid_path(path, "a name is longer than " + std::to_string(NAME_MAX) + " bytes");
    if (!normal.empty()) normal += '/';
    normal += part;
  }
  return normal.empty() ? "." : normal;
}

base::UniqueFd reopen_for_read(int path_fd, const struct stat& st, const std::string& shown_path) {
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    fail_with(shown_path, "not_a_file", "not a regular file or directory");
  }
  const std::string self = "/proc/self/fd/" + std::to_string(path_fd);
  base::UniqueFd fd(open(self.c_str(), (S_ISDIR(st.st_mode) ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC |
                                           O_NOCTTY | O_NONBLOCK));
  if (!fd) fail(shown_path, errno, "reopen for reading");
  return fd;
}

OpenedFile open_for_read(int root_fd, std::string_view path) {
  const std::string relative = normalize_sandbox_path(path);
  const std::string shown_path = shown_in_root(relative);
  const base::UniqueFd path_fd = open_in(in_root(root_fd), relative, O_PATH, shown_path);
  OpenedFile opened;
  opened.st = stat_fd(path_fd.get(), shown_path);
  refuse_kernel_filesystem(path_fd.get(), shown_path);
  opened.fd = reopen_for_read(path_fd.get(), opened.st, shown_path);
  return opened;
}

base::UniqueFd make_dirs(int root_fd, std::string_view path, const RootOwner& owner) {
  const std::string relative = normalize_sandbox_path(path);
  return open_dirs(in_root(root_fd), relative, owner, shown_in_root(relative));
}

std::uint64_t write_file(int root_fd, std::string_view path, const ByteReader& source, unsigned mode,
                         const RootOwner& owner, std::uint64_t limit_bytes, std::optional<struct timespec> mtime) {
  const std::string relative = normalize_sandbox_path(path);
  return write_in(in_root(root_fd), relative, shown_in_root(relative), source, mode, owner, limit_bytes, mtime);
}

base::UniqueFd make_dirs_beneath(int dir_fd, const std::string& name, const RootOwner& owner,
                                 std::optional<unsigned> mode) {
  base::UniqueFd dir = open_dirs(beneath(dir_fd), name, owner, name);
  if (mode && fchmod(dir.get(), *mode & 0777) != 0) fail(name, errno, "chmod directory");
  return dir;
}

std::uint64_t write_file_beneath(int dir_fd, const std::string& name, const ByteReader& source, unsigned mode,
                                 const RootOwner& owner, std::uint64_t limit_bytes,
                                 std::optional<struct timespec> mtime) {
  return write_in(beneath(dir_fd), name, name, source, mode, owner, limit_bytes, mtime);
}

void sync_filesystem(int root_fd) {
  const base::UniqueFd root = open_in(in_root(root_fd), ".", O_RDONLY | O_DIRECTORY, "/");
  if (syncfs(root.get()) != 0) fail_storing("/", errno, "sync the box's filesystem");
}

void make_symlink_beneath(int dir_fd, const std::string& name, const std::string& target, const RootOwner& owner) {
  const auto [parent, last] = split_last(name, name);
  const base::UniqueFd dir = open_dirs(beneath(dir_fd), parent, owner, name);
  TemporaryName temporary(dir.get(), temporary_name());
  if (symlinkat(target.c_str(), dir.get(), temporary.name().c_str()) != 0) fail(name, errno, "create symlink");
  if (fchownat(dir.get(), temporary.name().c_str(), owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW) != 0) {
    fail(name, errno, "chown symlink");
  }
  temporary.rename_to(last, name);
}

void make_hard_link_beneath(int dir_fd, const std::string& name, const std::string& existing,
                            const RootOwner& owner) {
  const auto [existing_parent, existing_last] = split_last(existing, existing);
  const base::UniqueFd existing_dir = open_in(beneath(dir_fd), existing_parent, O_PATH | O_DIRECTORY, existing);
  struct stat st {};
  if (fstatat(existing_dir.get(), existing_last.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    fail(existing, errno, "stat link target");
  }
  if (S_ISDIR(st.st_mode)) fail_with(existing, "not_a_file", "a hard link cannot name a directory");

  const auto [parent, last] = split_last(name, name);
  const base::UniqueFd dir = open_dirs(beneath(dir_fd), parent, owner, name);
  TemporaryName temporary(dir.get(), temporary_name());
  if (linkat(existing_dir.get(), existing_last.c_str(), dir.get(), temporary.name().c_str(), 0) != 0) {
    fail(name, errno, "hard link to " + shown(existing));
  }
  temporary.rename_to(last, name);
}

ActingAs::ActingAs(const RootOwner& owner, const std::vector<gid_t>& groups, bool keep_capabilities) {
  saved_securebits_ = prctl(PR_GET_SECUREBITS);
  if (saved_securebits_ < 0) base::throw_errno("files", "", "PR_GET_SECUREBITS");
  // A thread inherits its creator's credentials: say both ways what this one is to do.
  const int bits = keep_capabilities ? saved_securebits_ | SECBIT_NO_SETUID_FIXUP : saved_securebits_ & ~SECBIT_NO_SETUID_FIXUP;
  if (prctl(PR_SET_SECUREBITS, bits) != 0) base::throw_errno("files", "", "PR_SET_SECUREBITS");
  saved_caps_ = cap_get_proc();
  if (saved_caps_ == nullptr) base::throw_errno("files", "", "cap_get_proc");
  if (!keep_capabilities) {
    // Whatever fs uid this thread had: none of the capabilities that bypass file permissions stay effective.
    const cap_value_t file_caps[] = {CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID,
                                     CAP_LINUX_IMMUTABLE, CAP_MAC_OVERRIDE, CAP_MKNOD};
    cap_t reduced = cap_dup(static_cast<cap_t>(saved_caps_));
    const bool dropped = reduced != nullptr &&
                         cap_set_flag(reduced, CAP_EFFECTIVE, std::size(file_caps), file_caps, CAP_CLEAR) == 0 &&
                         cap_set_proc(reduced) == 0;
    if (reduced != nullptr) cap_free(reduced);
    if (!dropped) {
      cap_free(saved_caps_);
      prctl(PR_SET_SECUREBITS, saved_securebits_);
      base::throw_errno("files", "", "drop the file capabilities of this thread");
    }
  }
  const long count = syscall(SYS_getgroups, 0, nullptr);
  saved_groups_.resize(static_cast<std::size_t>(std::max(0L, count)));
  if (count < 0 || syscall(SYS_getgroups, saved_groups_.size(), saved_groups_.data()) != count ||
      syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
    cap_set_proc(static_cast<cap_t>(saved_caps_));
    cap_free(saved_caps_);
    prctl(PR_SET_SECUREBITS, saved_securebits_);
    base::throw_errno("files", "", "setgroups for this thread");
  }
  saved_fsgid_ = static_cast<gid_t>(setfsgid(owner.gid));
  saved_fsuid_ = static_cast<uid_t>(setfsuid(owner.uid));
}

ActingAs::~ActingAs() {
  setfsuid(saved_fsuid_);  // back to 0: the kernel raises the file capabilities again
  setfsgid(saved_fsgid_);
  syscall(SYS_setgroups, saved_groups_.size(), saved_groups_.data());
  cap_set_proc(static_cast<cap_t>(saved_caps_));
  cap_free(saved_caps_);
  prctl(PR_SET_SECUREBITS, saved_securebits_);
}

}  // namespace capsule::sandbox

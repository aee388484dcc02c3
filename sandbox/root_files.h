// Host-side file primitives under a live sandbox's root (a directory descriptor, e.g. /proc/<init>/root), for
// the session file API: every open is openat2 RESOLVE_IN_ROOT, so no path or planted symlink reaches the host.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"

namespace capsule::sandbox {

// Errors are base::Error with these codes (rows in http/error_status.cpp) and a message naming the path as the
// caller gave it: "invalid_path" (syntax, "..", too long), "not_found", "not_a_file" (a FIFO, socket or device,
// a directory where a file goes, a file where a directory goes, a symlink loop or one that may not be
// followed), "forbidden" (proc, sysfs, cgroupfs and other kernel filesystems), "payload_too_large" (a limit),
// "insufficient_storage" (ENOSPC / EDQUOT: the sandbox's disk is full), "conflict" (the path kept changing
// under a concurrent rename), "internal_error" otherwise.

// The host ids that everything created through these functions gets (the sandbox user's host ids).
struct RootOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// For as long as it lives, the calling thread's file-system identity is `owner` with `groups` (Linux keeps fs
// ids and groups per thread; raw syscalls, never glibc's all-thread broadcast). With `keep_capabilities` the
// daemon's capabilities stay (SECBIT_NO_SETUID_FIXUP): files are created as `owner` (a box's overlays live in its
// user namespace, where host root is unmapped: creating as host root fails with EOVERFLOW) yet nothing is refused.
// Without, the kernel drops the capabilities that bypass file permissions: the thread reads and writes exactly
// as that user may (a caller's own host tree). Use it on a thread of its own; the destructor restores the thread.
class ActingAs {
 public:
  ActingAs(const RootOwner& owner, const std::vector<gid_t>& groups, bool keep_capabilities);
  ~ActingAs();
  ActingAs(const ActingAs&) = delete;
  ActingAs& operator=(const ActingAs&) = delete;

 private:
  int saved_securebits_;
  uid_t saved_fsuid_;
  gid_t saved_fsgid_;
  std::vector<gid_t> saved_groups_;
  void* saved_caps_ = nullptr;  // libcap's cap_t (kept out of this header)
};

// Next chunk of bytes; an empty view at the end. The view stays valid until the next call.
using ByteReader = std::function<std::string_view()>;
// Receives the next chunk of output.
using ByteWriter = std::function<void(std::string_view)>;

// "/a//b/./c" or "a/b/c" -> "a/b/c" (absolute means from the sandbox root), "/" -> ".". Throws
// "invalid_path" for an empty path, a NUL byte, a ".." component, more than PATH_MAX bytes or a component
// longer than NAME_MAX.
std::string normalize_sandbox_path(std::string_view path);

struct OpenedFile {
  base::UniqueFd fd;  // O_RDONLY; a directory also has O_DIRECTORY
  struct stat st {};
};

// Opens a regular file or a directory for reading. A symlink anywhere in the path, the last component
// included, is followed, but only inside the root ("/" and ".." stop at it; magic links are refused). The
// path is first opened O_PATH (which opens nothing: no FIFO wait, no device open) and its type checked on that
// descriptor; only a regular file or directory is then reopened for reading through /proc/self/fd (the same
// inode, so no rename in between can substitute another). Throws "not_a_file" for anything else and
// "forbidden" for what is on a kernel filesystem.
OpenedFile open_for_read(int root_fd, std::string_view path);

// Creates the directory `path` and its missing parents (mode 0755, owned by `owner`; existing ones are left
// as they are) and returns it opened O_RDONLY | O_DIRECTORY. "." is the root itself.
base::UniqueFd make_dirs(int root_fd, std::string_view path, const RootOwner& owner);

// Writes the file `path` from `source`: missing parents are created as make_dirs does, the bytes go to a new
// temporary name in the target's directory (O_CREAT | O_EXCL: never through a symlink or into a FIFO), which
// gets `mode` & 0777, `owner` and `mtime` (now when unset), and is renamed over `path`: whatever had that name
// (a file, a symlink, a FIFO) is replaced, never written through. More than `limit_bytes` from the source
// throws "payload_too_large" and leaves nothing behind; so does a write or the sync before the rename that fails
// with ENOSPC, EDQUOT or EIO ("insufficient_storage": nothing was stored). Returns the bytes written.
std::uint64_t write_file(int root_fd, std::string_view path, const ByteReader& source, unsigned mode,
                         const RootOwner& owner, std::uint64_t limit_bytes,
                         std::optional<struct timespec> mtime = std::nullopt);

// Writes back everything the filesystem under `root_fd` has not yet written (syncfs): what a tree put into a box
// made besides its files' data (directories, inodes). Throws "insufficient_storage" when it cannot be stored.
void sync_filesystem(int root_fd);

// The *_beneath functions create a relative `name` under the directory `dir_fd` where no symlink is followed
// at all (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS; a symlink in the way throws "not_a_file"): what archive
// entries use, so an entry never goes through a symlink that an earlier entry made. `name` is already
// normalized (no "..", not absolute); it names the entry in errors.
// make_dirs_beneath / write_file_beneath: as make_dirs / write_file; make_dirs_beneath also gives the last
// directory, new or existing, `mode` & 0777 when set.
base::UniqueFd make_dirs_beneath(int dir_fd, const std::string& name, const RootOwner& owner,
                                 std::optional<unsigned> mode = std::nullopt);
std::uint64_t write_file_beneath(int dir_fd, const std::string& name, const ByteReader& source, unsigned mode,
                                 const RootOwner& owner, std::uint64_t limit_bytes,
                                 std::optional<struct timespec> mtime = std::nullopt);
// Creates the symlink `name` -> `target` (stored as given: it is only ever resolved inside the sandbox),
// owned by `owner`, replacing what had that name.
void make_symlink_beneath(int dir_fd, const std::string& name, const std::string& target, const RootOwner& owner);
// Makes `name` a hard link to the existing non-directory `existing`, both under `dir_fd`, replacing what had
// that name (missing parents of `name` are created for `owner`).
void make_hard_link_beneath(int dir_fd, const std::string& name, const std::string& existing,
                            const RootOwner& owner);

// True for a descriptor on proc, sysfs, cgroupfs and the other kernel filesystems, whose "files" are kernel
// interfaces: the daemon (root on the host) neither reads nor creates anything there for a caller.
bool is_kernel_filesystem(int fd);

// Opens the O_PATH descriptor `path_fd`, whose stat is `st`, for reading (O_DIRECTORY for a directory) through
// the daemon's /proc/self/fd: the very inode it holds, whatever happened to its name since. Throws
// "not_a_file" unless `st` is a regular file or directory. `shown` names it in errors.
base::UniqueFd reopen_for_read(int path_fd, const struct stat& st, const std::string& shown);

}  // namespace capsule::sandbox

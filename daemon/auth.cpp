// Peer rights: the caller from SO_PEERCRED/SO_PEERGROUPS, run visibility, and host paths opened in a helper
// process running with the caller's credentials (fork, drop to the caller, open, pass the fd back).
#include "daemon/auth.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "http/request.h"
#include "http/response.h"

namespace capsule::daemon {

bool Caller::in_group(gid_t group) const {
  return known && (gid == group || std::find(groups.begin(), groups.end(), group) != groups.end());
}

std::string Caller::describe() const { return known ? "uid " + std::to_string(uid) : std::string("an unidentified caller"); }

Caller root_caller() { return Caller{true, 0, 0, {}}; }

Caller caller_of(const http::PeerCredentials& peer) {
  if (!peer.known) return Caller{};
  return Caller{true, peer.uid, peer.gid, peer.groups};
}

bool sees_all_runs(const Caller& caller, const AccessPolicy& policy) {
  return caller.is_root() || (policy.admin_gid && caller.in_group(*policy.admin_gid));
}

bool may_see_run(const Caller& caller, const AccessPolicy& policy, uid_t owner_uid) {
  return sees_all_runs(caller, policy) || (caller.known && caller.uid == owner_uid);
}

void require_run_visible(const Caller& caller, const AccessPolicy& policy, uid_t owner_uid, const std::string& id) {
  if (!may_see_run(caller, policy, owner_uid)) throw http::ApiError("not_found", "no run with id " + id);
}

std::string OpenedHostPath::proc_path() const { return "/proc/self/fd/" + std::to_string(fd.get()); }

namespace {

constexpr int kHelperTimeoutMs = 10000;  // a path on a hung network filesystem must not hold the request forever

// A kind mismatch found after the access check: not an errno the kernel gives for these opens.
constexpr int kNotRegular = 10000;

// "/proc/self/fd/<fd>" into `out`, without allocating (the helper must not).
void proc_fd_path(int fd, char (&out)[32]) {
  static constexpr char kPrefix[] = "/proc/self/fd/";
  std::memcpy(out, kPrefix, sizeof kPrefix - 1);
  char digits[12];
  int count = 0;
  unsigned value = static_cast<unsigned>(fd);
  do {
    digits[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  for (int i = 0; i < count; ++i) out[sizeof kPrefix - 1 + i] = digits[count - 1 - i];
  out[sizeof kPrefix - 1 + count] = '\0';
}

// Reopens a pinned (O_PATH) object for I/O: the kernel checks the access on that same inode.
int reopen(int pinned, int flags) {
  char self[32];
  proc_fd_path(pinned, self);
  const int fd = open(self, flags | O_NOCTTY | O_CLOEXEC);
  return fd < 0 ? -errno : fd;
}

// The first open of a caller's path: /proc magic links are refused anywhere on the way (RESOLVE_NO_MAGICLINKS,
// ELOOP), since one names what some process holds open and skips the search rights of every directory above
// it. Returns the descriptor, or -1 with errno set. Async-signal-safe.
int open_refusing_magic_links(const char* path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags);
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  long fd;
  do {
    fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  } while (fd < 0 && errno == EINTR);
  return static_cast<int>(fd);
}

// Opens as whoever this process is; -errno (or -kNotRegular) on failure. Async-signal-safe: it runs in the
// forked helper. The object is first pinned with O_PATH, checked, then reopened through /proc/self/fd, so the
// access decision and the descriptor are about the same inode, and no device or fifo is ever opened for I/O.
int open_for(const char* path, HostAccess access, bool* created) {
  if (access == HostAccess::kCreateFile) {
    const int fd = open_refusing_magic_links(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd >= 0) {
      *created = true;
      return fd;
    }
    if (errno != EEXIST) return -errno;
  }
  const int flags = access == HostAccess::kCreateFile ? O_PATH | O_NOFOLLOW | O_CLOEXEC : O_PATH | O_CLOEXEC;
  const int pinned = open_refusing_magic_links(path, flags, 0);
  if (pinned < 0) return -errno;
  struct stat st;
  const bool wants_file = access == HostAccess::kReadFile || access == HostAccess::kCreateFile;
  int result;
  if (fstat(pinned, &st) != 0) {
    result = -errno;
  } else if (S_ISLNK(st.st_mode)) {
    result = -ELOOP;  // kCreateFile never writes through a final symlink
  } else if (wants_file ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode)) {
    // Not the kind asked for: say so only if the caller could read it at all, else it is a plain refusal.
    result = faccessat(pinned, "", R_OK, AT_EMPTY_PATH | AT_EACCESS) != 0 ? -EACCES
             : wants_file                                                  ? -kNotRegular
                                                                           : -ENOTDIR;
  } else if (access == HostAccess::kReadFile) {
    result = reopen(pinned, O_RDONLY);
  } else if (access == HostAccess::kCreateFile) {
    result = reopen(pinned, O_WRONLY);
  } else if (faccessat(pinned, "", access == HostAccess::kWriteDir ? (R_OK | X_OK | W_OK) : (R_OK | X_OK),
                       AT_EMPTY_PATH | AT_EACCESS) != 0) {
    result = -errno;
  } else {
    result = reopen(pinned, O_RDONLY | O_DIRECTORY);
  }
  close(pinned);
  return result;
}

struct HelperAnswer {
  int error = 0;  // errno, 0 when a descriptor came with the message
  int created = 0;
};

// The helper: takes on the caller's ids (groups first, then gid, then uid: after setresuid it could not),
// opens, sends the answer and the descriptor. Raw syscalls: only this thread exists after fork.
// Only the effective (and so the filesystem) uid becomes the caller's: every access decision is the caller's,
// and the effective capabilities are gone, while the real and saved uids stay root, so the caller can neither
// signal (stop) nor ptrace the helper, and its own FUSE mounts (no allow_other) cannot hang it.
[[noreturn]] void run_helper(int channel, const Caller& caller, const gid_t* groups, std::size_t group_count,
                             const char* path, HostAccess access) {
  HelperAnswer answer;
  int fd = -1;
  // It starts from nothing: every descriptor the daemon held (another user's workspace, a session's upper, the
  // ledger) is closed before a path is touched, so no path can name one. Failing that, it opens nothing.
  const bool closed = (channel == 0 || syscall(SYS_close_range, 0U, static_cast<unsigned>(channel - 1), 0U) == 0) &&
                      syscall(SYS_close_range, static_cast<unsigned>(channel + 1), ~0U, 0U) == 0;
  // The helper holds a copy of the daemon's memory and descriptors: once it runs as the caller, the caller
  // must not be able to ptrace it or read its /proc entries, whatever fs.suid_dumpable says. Changing ids
  // resets both settings (to suid_dumpable, and no death signal), so they are set again after.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  umask(022);
  if (!closed || syscall(SYS_setgroups, group_count, groups) != 0 || syscall(SYS_setresgid, caller.gid, caller.gid, caller.gid) != 0 ||
      syscall(SYS_setresuid, 0, caller.uid, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 ||
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
    answer.error = errno;
  } else {
    bool created = false;
    fd = open_for(path, access, &created);
    if (fd < 0) answer.error = -fd;
    answer.created = created ? 1 : 0;
  }
  iovec data{&answer, sizeof answer};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  }
  _exit(sendmsg(channel, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof answer) ? 0 : 1);
}

// -errno, or the descriptor, from a helper running as `caller`.
int open_in_helper(const Caller& caller, const std::string& path, HostAccess access, bool* created) {
  int channel[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0) {
    throw http::ApiError("internal_error", std::string("socketpair for the path helper: ") + std::strerror(errno));
  }
  base::UniqueFd ours(channel[0]);
  base::UniqueFd theirs(channel[1]);
  std::vector<gid_t> groups = caller.groups;  // copied before fork: the helper must not allocate
  const pid_t pid = fork();
  if (pid < 0) throw http::ApiError("internal_error", std::string("fork of the path helper: ") + std::strerror(errno));
  if (pid == 0) run_helper(theirs.get(), caller, groups.data(), groups.size(), path.c_str(), access);
  theirs.reset();

  HelperAnswer answer;
  int fd = -1;
  pollfd ready{ours.get(), POLLIN, 0};
  int polled;
  do {
    polled = poll(&ready, 1, kHelperTimeoutMs);
  } while (polled < 0 && errno == EINTR);
  bool answered = false;
  if (polled > 0) {
    iovec data{&answer, sizeof answer};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr message{};
    message.msg_iov = &data;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t got = recvmsg(ours.get(), &message, MSG_CMSG_CLOEXEC);
    answered = got == static_cast<ssize_t>(sizeof answer);
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
      if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
    }
  } else {
    kill(pid, SIGKILL);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  base::UniqueFd received(fd);
  if (!answered) {
    throw http::ApiError(polled > 0 ? "internal_error" : "path_timeout",
                   "opening '" + path + "' as " + caller.describe() +
                       (polled > 0 ? ": the helper gave no answer" : ": no answer within 10 s"));
  }
  if (answer.error != 0) return -answer.error;
  if (!received) throw http::ApiError("internal_error", "opening '" + path + "': the helper sent no descriptor");
  *created = answer.created != 0;
  return received.release();
}

const char* access_words(HostAccess access) {
  switch (access) {
    case HostAccess::kReadDir: return "read";
    case HostAccess::kWriteDir: return "write";
    case HostAccess::kReadFile: return "read";
    case HostAccess::kCreateFile: return "write";
  }
  return "open";
}

}  // namespace

OpenedHostPath open_as_caller(const Caller& caller, const std::string& path, HostAccess access,
                              const std::string& field, const std::string& bad_field_code) {
  if (!caller.known) {
    throw http::ApiError("forbidden", field + ": " + caller.describe() + " may not name host paths ('" + path + "')");
  }
  if (path.empty() || path.front() != '/' || path.find('\0') != std::string::npos) {
    throw http::ApiError(bad_field_code, field + ": must be an absolute host path");
  }
  bool created = false;
  int result;
  if (caller.is_root()) {
    result = open_for(path.c_str(), access, &created);
  } else {
    result = open_in_helper(caller, path, access, &created);
  }
  if (result < 0) {
    const int error = -result;
    const std::string cause = std::strerror(error);
    if (error == EACCES || error == EPERM || error == EROFS) {
      throw http::ApiError("forbidden", field + ": " + caller.describe() + " may not " + access_words(access) + " '" +
                                           path + "' (" + cause + ")");
    }
    if (error == kNotRegular) throw http::ApiError(bad_field_code, field + ": '" + path + "' is not a regular file");
    if (error == ENOTDIR) throw http::ApiError(bad_field_code, field + ": '" + path + "' is not a directory on the host");
    if (error == ELOOP) {
      throw http::ApiError(bad_field_code, field + ": '" + path + "' is a symbolic link, or passes through a /proc "
                                           "magic link such as /proc/self/fd/N, which is never followed (" + cause + ")");
    }
    if (error == ENOENT) throw http::ApiError(bad_field_code, field + ": '" + path + "' does not exist on the host");
    throw http::ApiError(bad_field_code, field + ": cannot open '" + path + "' (" + cause + ")");
  }
  OpenedHostPath opened;
  opened.fd.reset(result);
  opened.created = created;
  opened.path = path;
  if (fstat(opened.fd.get(), &opened.st) != 0) {
    throw http::ApiError("internal_error", field + ": fstat of '" + path + "': " + std::strerror(errno));
  }
  const bool want_file = access == HostAccess::kReadFile || access == HostAccess::kCreateFile;
  if (want_file && !S_ISREG(opened.st.st_mode)) {
    throw http::ApiError(bad_field_code, field + ": '" + path + "' is not a regular file");
  }
  if (want_file) {
    const int flags = fcntl(opened.fd.get(), F_GETFL);
    if (flags >= 0) fcntl(opened.fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  }
  return opened;
}

}  // namespace capsule::daemon

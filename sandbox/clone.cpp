// clone3 + the child's pre-exec path: wait for the id maps, become namespace root, arrange the
// inherited descriptors, execveat capsule-init. Only raw syscalls run in the child.
#include "sandbox/clone.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "base/unique_fd.h"
#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

constexpr std::uint64_t kNamespaceFlags =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET;

// Exit codes of the child before capsule-init runs; the launcher maps them to a step.
constexpr int kExitNoGo = 120;
constexpr int kExitIds = 121;
constexpr int kExitFds = 122;
constexpr int kExitExec = 123;

[[noreturn]] void child_main(const ChildFds& fds, char* const argv[], char* const envp[]) {
  char go;
  if (read(fds.go_fd, &go, 1) != 1) _exit(kExitNoGo);

  // Raw syscalls: glibc's set*id wrappers broadcast to threads that do not exist in this child.
  if (syscall(SYS_setresgid, 0, 0, 0) != 0 || syscall(SYS_setgroups, 0, nullptr) != 0 ||
      syscall(SYS_setresuid, 0, 0, 0) != 0) {
    _exit(kExitIds);
  }

  if (!keep_only_descriptors({fds.stdin_fd, fds.stdout_fd, fds.stderr_fd, fds.control_fd, fds.init_exe_fd})) {
    _exit(kExitFds);
  }
  syscall(SYS_execveat, 4, "", argv, envp, AT_EMPTY_PATH);
  _exit(kExitExec);
}

}  // namespace

bool keep_only_descriptors(const std::array<int, 5>& wanted) {
  // Above everything first, so that moving one down never overwrites another still to be moved.
  int high[5];
  for (int i = 0; i < 5; ++i) {
    high[i] = fcntl(wanted[i], F_DUPFD, 1024);
    if (high[i] < 0) return false;
  }
  for (int i = 0; i < 5; ++i) {
    if (dup2(high[i], i) != i) return false;
  }
  if (syscall(SYS_close_range, 5, ~0U, 0) != 0) return false;
  return fcntl(4, F_SETFD, FD_CLOEXEC) == 0;
}

ClonedChild clone_sandbox_child(const ChildFds& fds, char* const argv[], char* const envp[],
                                std::uint64_t extra_flags) {
  std::uint64_t namespaces = kNamespaceFlags;
  base::UniqueFd own_network;
  if (fds.network_fd >= 0) {
    own_network.reset(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!own_network) throw_errno("clone", "/proc/thread-self/ns/net", "open");
    if (setns(fds.network_fd, CLONE_NEWNET) != 0) throw_errno("clone", "", "setns into the box's network namespace");
    namespaces &= ~static_cast<std::uint64_t>(CLONE_NEWNET);
  }
  // Back to the caller's own network namespace, whatever happened.
  struct Return {
    int fd;
    ~Return() {
      if (fd >= 0) setns(fd, CLONE_NEWNET);
    }
  } back{own_network.get()};
  int pidfd = -1;
  clone_args args{};
  args.flags = namespaces | CLONE_PIDFD | CLONE_CLEAR_SIGHAND | extra_flags;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  // Reaped only through the pidfd, never by a stray waitpid(-1). With CLONE_PARENT the kernel gives the child the
  // caller's own exit signal instead: the spawner is started with 0 for that reason.
  args.exit_signal = 0;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) throw_errno("clone", "", "clone3");
  if (pid == 0) child_main(fds, argv, envp);
  fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  return ClonedChild{static_cast<pid_t>(pid), pidfd};
}

const char* describe_child_exit(int code) {
  switch (code) {
    case kExitNoGo: return "child: launcher went away before the go signal";
    case kExitIds: return "child: setresuid/setresgid to namespace root failed";
    case kExitFds: return "child: arranging descriptors failed";
    case kExitExec: return "child: execveat of capsule-init failed";
    default: return nullptr;
  }
}

}  // namespace capsule::sandbox

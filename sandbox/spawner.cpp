// Spawner: the daemon's side starts the helper (clone3 with exit signal 0, so that its CLONE_PARENT children get 0
// too, then execveat of capsule-init --spawner) and sends it one request per sandbox: the child's six descriptors;
// the answer is the pid and its pidfd. The helper's side clones and answers, nothing else.
#include "sandbox/spawner.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "sandbox/channel.h"
#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

constexpr int kHelperChannelFd = 3;
constexpr int kHelperExeFd = 4;
constexpr int kRequestFds = 6;  // ChildFds, in declaration order (and network_fd after them when asked)

// In the helper's child before execveat (the daemon is multi-threaded): raw syscalls only.
[[noreturn]] void exec_helper(int null_fd, int channel, int init_exe) {
  if (!keep_only_descriptors({null_fd, null_fd, null_fd, channel, init_exe})) _exit(126);
  char name[] = "capsule-init";
  char role[] = "--spawner";
  char* argv[] = {name, role, nullptr};
  char* envp[] = {nullptr};
  syscall(SYS_execveat, kHelperExeFd, "", argv, envp, AT_EMPTY_PATH);
  _exit(127);
}

}  // namespace

Spawner::Spawner(int init_exe_fd) : init_exe_fd_(init_exe_fd) {
  std::lock_guard lock(mutex_);
  start_locked();
}

Spawner::~Spawner() {
  std::lock_guard lock(mutex_);
  stop_locked();
}

void Spawner::start_locked() {
  auto [ours, theirs] = make_channel();
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) {
    close(ours);
    close(theirs);
    throw_errno("clone", "/dev/null", "open for the spawner");
  }
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = 0;
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) exec_helper(null_fd, theirs, init_exe_fd_);
  const int saved = errno;
  close(null_fd);
  close(theirs);
  if (pid < 0) {
    close(ours);
    errno = saved;
    throw_errno("clone", "", "clone3 of the spawner");
  }
  fcntl(pidfd, F_SETFD, FD_CLOEXEC);
  helper_pid_ = static_cast<pid_t>(pid);
  helper_pidfd_ = pidfd;
  channel_ = ours;
}

void Spawner::stop_locked() {
  if (channel_ >= 0) close(channel_);  // the helper reads EOF and exits; killed all the same (it may be stopped)
  channel_ = -1;
  if (helper_pidfd_ >= 0) {
    syscall(SYS_pidfd_send_signal, helper_pidfd_, SIGKILL, nullptr, 0);
    siginfo_t info{};
    waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(helper_pidfd_), &info, WEXITED | __WALL);
    close(helper_pidfd_);
  }
  helper_pidfd_ = -1;
  helper_pid_ = -1;
}

std::optional<ClonedChild> Spawner::request_locked(const ChildFds& fds) {
  try {
    send_message(channel_, fds.network_fd >= 0 ? "spawn-in-network" : "spawn");
    for (int fd : {fds.stdin_fd, fds.stdout_fd, fds.stderr_fd, fds.control_fd, fds.init_exe_fd, fds.go_fd}) {
      send_fd(channel_, fd);
    }
    if (fds.network_fd >= 0) send_fd(channel_, fds.network_fd);
  } catch (const SandboxError&) {
    return std::nullopt;  // the helper was gone before it had the request: asking a new one is safe
  }
  // From here the helper may have cloned: a retry would start a second child on the same go pipe. The caller
  // fails this box instead (closing the go pipe ends such a child before it has done anything).
  std::optional<std::string> answer;
  try {
    answer = receive_message(channel_);
  } catch (const SandboxError&) {
    answer.reset();
  }
  if (!answer) {
    stop_locked();
    throw_error("clone", "", "the spawner exited before answering");
  }
  if (answer->rfind("error ", 0) == 0) {
    errno = std::atoi(answer->c_str() + 6);
    throw_errno("clone", "", "clone3 (in the spawner)");
  }
  const pid_t pid = static_cast<pid_t>(std::atol(answer->c_str()));
  int pidfd = -1;
  try {
    pidfd = receive_fd(channel_);
  } catch (const SandboxError&) {
    if (pid > 0) {  // a child we cannot watch: it goes (blocked before its exec, it did nothing), reaped here
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, __WALL);
    }
    stop_locked();
    throw_error("clone", "", "the spawner's answer came without the child's pidfd");
  }
  return ClonedChild{pid, pidfd};
}

ClonedChild Spawner::spawn(const ChildFds& fds) {
  std::lock_guard lock(mutex_);
  if (channel_ < 0) start_locked();
  if (std::optional<ClonedChild> child = request_locked(fds)) return *child;
  // The helper was gone before it had the request (killed): once more with a new one.
  stop_locked();
  start_locked();
  if (std::optional<ClonedChild> child = request_locked(fds)) return *child;
  stop_locked();
  throw_error("clone", "", "the spawner exited twice in a row");
}

[[noreturn]] void serve_spawn_requests() {
  for (;;) {
    std::optional<std::string> request;
    int fds[kRequestFds + 1];
    int received = 0;
    try {
      request = receive_message(kHelperChannelFd);
      if (!request) _exit(0);  // the launcher is gone
      const int wanted = *request == "spawn-in-network" ? kRequestFds + 1 : kRequestFds;
      for (; received < wanted; ++received) fds[received] = receive_fd(kHelperChannelFd);
    } catch (const SandboxError&) {
      _exit(1);  // a broken channel: the launcher starts a new helper
    }
    char name[] = "capsule-init";
    char* argv[] = {name, nullptr};
    char* envp[] = {nullptr};
    try {
      const int network_fd = received > kRequestFds ? fds[kRequestFds] : -1;
      const ClonedChild child = clone_sandbox_child(ChildFds{fds[0], fds[1], fds[2], fds[3], fds[4], fds[5], network_fd},
                                                    argv, envp, CLONE_PARENT);
      send_message(kHelperChannelFd, std::to_string(child.pid));
      send_fd(kHelperChannelFd, child.pidfd);
      close(child.pidfd);
    } catch (const SandboxError& e) {
      try {
        send_message(kHelperChannelFd, "error " + std::to_string(e.cause().errno_value));
      } catch (const SandboxError&) {
        _exit(1);
      }
    }
    for (int i = 0; i < received; ++i) close(fds[i]);
  }
}

}  // namespace capsule::sandbox

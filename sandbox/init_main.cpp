// capsule-init: PID 1 of every sandbox. Receives its InitConfig over the control channel (fd 3),
// builds the filesystem, forks the command, reaps every zombie and reports the command's exit.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/caps.h"
#include "sandbox/channel.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/init_config.h"
#include "sandbox/mounts.h"
#include "sandbox/net.h"

namespace capsule::sandbox {
namespace {

constexpr int kControlFd = 3;

void send_event(const nlohmann::json& event) {
  try {
    send_message(kControlFd, event.dump());
  } catch (const SandboxError&) {
    // The launcher is gone; nothing left to tell.
  }
}

void send_error(const base::Cause& cause) {
  send_event({{"event", init_event::kError}, {"step", cause.step}, {"path", cause.path},
              {"errno", cause.errno_value}, {"detail", cause.detail}});
}

std::vector<std::uint8_t> decode_hex(const std::string& hex) {
  std::vector<std::uint8_t> bytes(hex.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
  return bytes;
}

std::vector<int> receive_fds(std::size_t count) {
  std::vector<int> fds;
  for (std::size_t i = 0; i < count; ++i) fds.push_back(receive_fd(kControlFd));
  return fds;
}

InitConfig set_up_sandbox() {
  auto message = receive_message(kControlFd);
  if (!message) throw_error("init", "", "launcher closed the channel before sending the config");
  InitConfig config = decode_init_config(*message);
  std::vector<int> layer_fds = receive_fds(config.layers.size());
  std::vector<int> bind_fds = receive_fds(config.binds.size());

  // The launcher has placed us in our cgroup by now; make it the root of what we can see.
  if (unshare(CLONE_NEWCGROUP) != 0) throw_errno("cgroupns", "", "unshare(CLONE_NEWCGROUP)");
  build_filesystem(config, layer_fds, bind_fds);
  for (int fd : layer_fds) close(fd);
  for (int fd : bind_fds) close(fd);
  if (sethostname(config.hostname.data(), config.hostname.size()) != 0) {
    throw_errno("uts", config.hostname, "sethostname");
  }
  bring_up_loopback();
  return config;
}

// Reads the command's reports: the pre-seccomp timestamp, then either EOF (exec done) or an error.
void relay_command_reports(int report_fd) {
  CommandReport first;
  CommandReport second;
  ssize_t got = read(report_fd, &first, sizeof first);
  ssize_t got2 = got == sizeof first && first.error == 0 ? read(report_fd, &second, sizeof second) : 0;
  const CommandReport* error = got == sizeof first && first.error != 0 ? &first
                               : got2 == sizeof second                ? &second
                                                                      : nullptr;
  if (error != nullptr) {
    send_error(base::Cause{error->step, error->path, error->error, "starting the command"});
  } else if (got == sizeof first) {
    send_event({{"event", init_event::kExec}, {"t_ns", monotonic_ns()}, {"seccomp_t_ns", first.t_ns}});
  }
}

// Stdio of init itself points at /dev/null so only the command and its children hold the pipes.
void detach_stdio() {
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return;
  for (int fd = 0; fd <= 2; ++fd) dup2(null_fd, fd);
  close(null_fd);
}

// The wall-time watchdog of init itself, for when capsuled is not there to enforce it (crashed, restarting):
// SIGTERM to everything at the deadline, SIGKILL a grace later. A stop signal from the launcher first means
// it is handling the end; the watchdog then only escalates to SIGKILL if that end never comes.
class Watchdog {
 public:
  Watchdog(std::int64_t deadline_ns, std::int64_t grace_ms)
      : next_ns_(deadline_ns), grace_ns_(grace_ms * 1000000) {}

  // How long sigtimedwait may sleep; null when no watchdog is set.
  const timespec* timeout(timespec& out) const {
    if (next_ns_ == 0) return nullptr;
    const std::int64_t left = std::max<std::int64_t>(0, next_ns_ - monotonic_ns());
    out = timespec{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
    return &out;
  }
  void launcher_stopping() {
    if (next_ns_ != 0 && !terminated_) {
      terminated_ = true;
      next_ns_ = std::max(next_ns_, monotonic_ns() + grace_ns_ + 1000000000);
    }
  }
  void tick() {
    if (next_ns_ == 0 || monotonic_ns() < next_ns_) return;
    if (!terminated_) {
      terminated_ = true;
      kill(-1, SIGTERM);
      next_ns_ = monotonic_ns() + grace_ns_;
      return;
    }
    kill(-1, SIGKILL);
    next_ns_ = 0;
  }

 private:
  std::int64_t next_ns_;
  std::int64_t grace_ns_;
  bool terminated_ = false;
};

[[noreturn]] void supervise(pid_t command, const sigset_t& handled, Watchdog watchdog) {
  int command_status = 0;
  bool command_done = false;
  while (!command_done) {
    siginfo_t info;
    timespec wait_for{};
    int signo = sigtimedwait(&handled, &info, watchdog.timeout(wait_for));
    if (signo < 0) {
      watchdog.tick();
      continue;
    }
    if (signo != SIGCHLD) {
      // Only the launcher (outside our pid namespace, so si_pid 0) may ask us to stop everything.
      if (info.si_pid == 0) {
        kill(-1, signo);
        watchdog.launcher_stopping();
      }
      continue;
    }
    for (;;) {
      int status;
      pid_t reaped = waitpid(-1, &status, WNOHANG);
      if (reaped <= 0) break;
      if (reaped == command) {
        command_status = status;
        command_done = true;
      }
    }
    watchdog.tick();
  }
  // The sandbox ends with its command, as containers do: nothing may outlive it.
  kill(-1, SIGKILL);
  while (waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
  }
  if (WIFSIGNALED(command_status)) {
    send_event({{"event", init_event::kExited}, {"signal", WTERMSIG(command_status)}});
  } else {
    send_event({{"event", init_event::kExited}, {"code", WEXITSTATUS(command_status)}});
  }
  _exit(0);
}

int init_main() {
  // Non-dumpable from the start: the command must never be able to open /proc/1/mem or /proc/1/fd.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  fcntl(kControlFd, F_SETFD, FD_CLOEXEC);
  sigset_t handled;
  sigemptyset(&handled);
  for (int signo : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&handled, signo);
  sigprocmask(SIG_SETMASK, &handled, nullptr);

  InitConfig config;
  std::vector<std::uint8_t> program;
  try {
    config = set_up_sandbox();
    program = decode_hex(config.seccomp_program_hex);
  } catch (const SandboxError& e) {
    send_error(e.cause());
    return 1;
  } catch (const std::exception& e) {
    send_error(base::Cause{"init", "", 0, e.what()});
    return 1;
  }
  send_event({{"event", init_event::kReady}, {"t_ns", monotonic_ns()}});

  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    send_error(base::Cause{"init", "", errno, "pipe2"});
    return 1;
  }
  pid_t command = fork();
  if (command < 0) {
    send_error(base::Cause{"init", "", errno, "fork"});
    return 1;
  }
  if (command == 0) {
    close(report[0]);
    run_command(config, program, report[1]);
  }
  close(report[1]);
  detach_stdio();
  try {
    drop_privileges(0, 0);
    set_no_new_privs();
  } catch (const SandboxError& e) {
    send_error(e.cause());
    kill(command, SIGKILL);
    return 1;
  }
  relay_command_reports(report[0]);
  close(report[0]);
  supervise(command, handled, Watchdog(config.watchdog_ns, config.kill_grace_ms));
}

}  // namespace
}  // namespace capsule::sandbox

int main() { return capsule::sandbox::init_main(); }

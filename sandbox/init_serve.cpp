// The exec server inside every sandbox: one poll over the control channel and a signalfd. Each request forks
// a child that joins the exec's cgroup, drops everything and execs (command.cpp); init keeps only what that needs.
#include "sandbox/init_serve.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/channel.h"
#include "sandbox/init_channel.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/exec_request.h"

namespace capsule::sandbox {
namespace {

// The wall-time watchdog of a one-shot box, for when capsuled is not there to enforce it: SIGTERM to everything
// at the deadline, SIGKILL a grace later. A stop signal from the launcher first means it is handling the end;
// the watchdog then only escalates to SIGKILL if that end never comes.
class Watchdog {
 public:
  void arm(std::int64_t deadline_ns, std::int64_t grace_ms) {
    next_ns_ = deadline_ns;
    grace_ns_ = grace_ms * 1000000;
  }
  int timeout_ms() const {
    if (next_ns_ == 0) return -1;
    const std::int64_t left = std::max<std::int64_t>(0, next_ns_ - monotonic_ns());
    return static_cast<int>(std::min<std::int64_t>((left + 999999) / 1000000, 1 << 30));
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
  std::int64_t next_ns_ = 0;
  std::int64_t grace_ns_ = 0;
  bool terminated_ = false;
};

// One exec's child until it is reaped. Its reports come through a non-blocking pipe read in the poll loop: a
// child stopped before execve (SIGSTOP from elsewhere in the box) never stalls init.
struct LiveExec {
  std::uint64_t id = 0;
  bool ends_sandbox = false;
  int report_fd = -1;          // -1 once its reports are read
  CommandReport first{};       // the pre-seccomp record
  bool got_first = false;
};

class ExecServer {
 public:
  ExecServer(const InitConfig& config, const std::vector<std::uint8_t>& program, int signal_fd)
      : config_(config), program_(program), signal_fd_(signal_fd) {}

  [[noreturn]] void run() {
    for (;;) {
      std::vector<pollfd> fds = {{signal_fd_, POLLIN, 0}, {control_open_ ? kInitControlFd : -1, POLLIN, 0}};
      for (const auto& [pid, exec] : execs_) {
        if (exec.report_fd >= 0) fds.push_back({exec.report_fd, POLLIN, 0});
      }
      int ready = poll(fds.data(), fds.size(), watchdog_.timeout_ms());
      if (ready < 0 && errno != EINTR) end_box();
      for (std::size_t i = 2; ready > 0 && i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        for (auto& [pid, exec] : execs_) {
          if (exec.report_fd == fds[i].fd) read_reports(exec);
        }
      }
      if (ready > 0 && fds[1].revents != 0) serve_request();
      if (ready > 0 && fds[0].revents != 0) handle_signals();
      watchdog_.tick();
    }
  }

 private:
  void serve_request() {
    std::optional<std::string> message;
    try {
      message = receive_message(kInitControlFd);
    } catch (const SandboxError&) {
      message.reset();
    }
    if (!message) {
      control_open_ = false;
      if (config_.session) end_box();  // the daemon is gone: nobody can reach this session any more
      return;
    }
    ExecRequest request;
    std::vector<int> fds;
    try {
      request = decode_exec_request(*message);
      for (std::size_t i = 0; i < 3 + request.cgroup_fds; ++i) fds.push_back(receive_fd(kInitControlFd));
    } catch (const SandboxError& e) {
      for (int fd : fds) close(fd);
      send_init_error(request.id, e.cause());
      send_init_event({{"event", init_event::kExited}, {"id", request.id}, {"code", 127}});
      return;
    }
    start(request, fds);
    for (int fd : fds) close(fd);
  }

  void start(const ExecRequest& request, const std::vector<int>& fds) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return fail_to_start(request.id, "pipe2");
    pid_t child = fork();
    if (child < 0) {
      close(report[0]);
      close(report[1]);
      return fail_to_start(request.id, "fork");
    }
    if (child == 0) {
      close(report[0]);
      for (int target = 0; target < 3; ++target) {
        if (dup2(fds[static_cast<std::size_t>(target)], target) < 0) _exit(127);
      }
      run_command(request, program_, report[1], std::vector<int>(fds.begin() + 3, fds.end()));
    }
    close(report[1]);
    // Init moves the child into the exec's cgroup too (the child also joins first thing): a child stopped by
    // something else in the box before it could join is still in the group its timeout or kill reaches.
    const std::string pid = std::to_string(child);
    for (std::size_t i = 3; i < fds.size(); ++i) {
      ssize_t ignored = write(fds[i], pid.data(), pid.size());
      (void)ignored;
    }
    fcntl(report[0], F_SETFL, O_NONBLOCK);
    LiveExec& exec = execs_[child];
    exec.id = request.id;
    exec.ends_sandbox = request.ends_sandbox;
    exec.report_fd = report[0];
    if (request.ends_sandbox && request.watchdog_ns != 0) watchdog_.arm(request.watchdog_ns, request.kill_grace_ms);
  }

  void fail_to_start(std::uint64_t id, const char* step) {
    send_init_error(id, base::Cause{"init", "", errno, step});
    send_init_event({{"event", init_event::kExited}, {"id", id}, {"code", 127}});
  }

  // The child's reports: the pre-seccomp record, then either EOF (exec done) or an error record. Reads what is
  // there; done (the pipe closed) at EOF, after an error, or when the child died without a word.
  void read_reports(LiveExec& exec) {
    for (;;) {
      CommandReport record;
      const ssize_t got = read(exec.report_fd, &record, sizeof record);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EAGAIN) return;
      if (got == static_cast<ssize_t>(sizeof record) && record.error == 0 && !exec.got_first) {
        exec.first = record;
        exec.got_first = true;
        continue;
      }
      if (got == static_cast<ssize_t>(sizeof record)) {
        send_init_error(exec.id, base::Cause{record.step, record.path, record.error, "starting the command"});
      } else if (got == 0 && exec.got_first) {
        send_init_event({{"event", init_event::kExec}, {"id", exec.id}, {"t_ns", monotonic_ns()},
                         {"seccomp_t_ns", exec.first.t_ns}});
      }
      close(exec.report_fd);
      exec.report_fd = -1;
      return;
    }
  }

  void handle_signals() {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (info.ssi_signo != SIGCHLD) {
        // Only the launcher (outside our pid namespace, so ssi_pid 0, sent by kill: SI_USER) may ask us to stop
        // everything; a SIGIO-style signal a box process routed to init (F_SETOWN) also has ssi_pid 0.
        if (info.ssi_pid == 0 && info.ssi_code == SI_USER) {
          kill(-1, static_cast<int>(info.ssi_signo));
          watchdog_.launcher_stopping();
        }
      }
    }
    reap();
  }

  void reap() {
    for (;;) {
      int status;
      pid_t reaped = waitpid(-1, &status, WNOHANG);
      if (reaped <= 0) return;
      auto it = execs_.find(reaped);
      if (it == execs_.end()) continue;
      // Its reports first, so that "exec" or "error" precede "exited" (its writer died with it: all is there).
      if (it->second.report_fd >= 0) read_reports(it->second);
      if (it->second.report_fd >= 0) close(it->second.report_fd);
      const LiveExec exec = it->second;
      execs_.erase(it);
      if (exec.ends_sandbox) {
        // A one-shot box ends with its command, as containers do: nothing may outlive it.
        kill(-1, SIGKILL);
        while (waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
        }
      }
      report_exit(exec.id, status);
      if (exec.ends_sandbox) _exit(0);
    }
  }

  static void report_exit(std::uint64_t id, int status) {
    if (WIFSIGNALED(status)) {
      send_init_event({{"event", init_event::kExited}, {"id", id}, {"signal", WTERMSIG(status)}});
    } else {
      send_init_event({{"event", init_event::kExited}, {"id", id}, {"code", WEXITSTATUS(status)}});
    }
  }

  [[noreturn]] static void end_box() {
    kill(-1, SIGKILL);
    while (waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
    }
    _exit(0);
  }

  const InitConfig& config_;
  const std::vector<std::uint8_t>& program_;
  int signal_fd_;
  bool control_open_ = true;
  std::map<pid_t, LiveExec> execs_;
  Watchdog watchdog_;
};

}  // namespace

void serve_execs(const InitConfig& config, const std::vector<std::uint8_t>& seccomp_program, const sigset_t& handled) {
  int signal_fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    send_init_error(0, base::Cause{"init", "", errno, "signalfd"});
    _exit(1);
  }
  ExecServer(config, seccomp_program, signal_fd).run();
}

}  // namespace capsule::sandbox

// The exec server inside every sandbox: one poll over the control channel and a signalfd. Each request forks
// a child that joins the exec's cgroup, drops everything and execs (command.cpp); init keeps only what that needs.
// A prepared exec's child was forked ahead and joined its cgroup then (a cgroup move waits for an RCU grace
// period, milliseconds) and, where the profile allows, installed its seccomp filter: the request only hands it
// its command and descriptors.
#include "sandbox/init_serve.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/caps.h"
#include "sandbox/channel.h"
#include "sandbox/init_channel.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/exec_request.h"
#include "sandbox/oom_guard.h"
#include "sandbox/seccomp.h"

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
  // A prepared exec's channel to its child, open until it is reaped: closing it with the child's "J" unread
  // would reset the connection under the child before it read its request (ECONNRESET).
  int standby_channel = -1;
};

// A child forked by "prepare", waiting in its exec's cgroup for that exec's request on `channel`. Init keeps
// the cgroup.procs descriptors: should the child be gone (killed from inside the box) the exec forks anew.
struct Standby {
  pid_t pid = -1;  // -1 once it died unused
  int channel = -1;
  std::vector<int> cgroup_fds;
};

// Whether a standby can take its exec: not stopped and with no signal pending (/proc/<pid>/status). A signal
// sent into the box before the exec was asked for (`kill -STOP -1`, then `kill -TERM -1`) must not reach it.
// Running, sleeping and in uninterruptible sleep all pass: the last is a page fault or a cgroup write of its own
// when the host is loaded, and refusing it made the exec fork anew (pid 3 instead of 2, unlike a fresh box).
bool standby_is_quiet(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[4096];
  const ssize_t got = read(fd, text, sizeof text - 1);
  close(fd);
  if (got <= 0) return false;
  text[got] = '\0';
  const char* state = std::strstr(text, "\nState:\t");
  if (state == nullptr || (state[8] != 'S' && state[8] != 'R' && state[8] != 'D')) return false;
  for (const char* field : {"\nSigPnd:\t", "\nShdPnd:\t"}) {
    const char* line = std::strstr(text, field);
    if (line == nullptr) return false;
    for (const char* c = line + std::strlen(field); *c != '\n' && *c != '\0'; ++c) {
      if (*c != '0') return false;
    }
  }
  return true;
}

// What a standby calls from its "J" to the command's execve, the failure path included (strace of a standby, and
// glibc's variants of the same calls): receiving the request, stdio, limits, ids, the cwd, the executable's
// lookup, the report, execve. A filter that allows all of them whatever their arguments goes on before the
// request comes; installing it (~250 us: the kernel converts, JITs and precomputes it) is then off the exec's path.
const std::vector<ExpectedCall>& standby_calls_under_filter() {
  static const std::vector<ExpectedCall> calls = [] {
    std::vector<ExpectedCall> any;
    for (long nr : {SYS_sendto, SYS_recvfrom, SYS_recvmsg, SYS_dup3, SYS_close, SYS_rt_sigprocmask, SYS_setsid,
                    SYS_prlimit64, SYS_setgroups, SYS_setresgid, SYS_setresuid, SYS_capget, SYS_capset, SYS_chdir,
                    SYS_faccessat, SYS_faccessat2, SYS_statx, SYS_close_range, SYS_write, SYS_execve,
                    SYS_exit_group, SYS_brk, SYS_mmap, SYS_munmap, SYS_mremap, SYS_fstat,
                    SYS_clock_gettime,  // the report's time, where the vDSO falls back to the call
#ifdef SYS_dup2
                    SYS_dup2,
#endif
#ifdef SYS_access
                    SYS_access,
#endif
#ifdef SYS_newfstatat
                    SYS_newfstatat,
#endif
#ifdef SYS_stat
                    SYS_stat,
#endif
                   }) {
      any.push_back(ExpectedCall{nr, {}});
    }
    // Two with arguments known now: a pty exec's controlling terminal, and no_new_privs set again.
    any.push_back(ExpectedCall{SYS_ioctl, {0, TIOCSCTTY, 0}});
    any.push_back(ExpectedCall{SYS_prctl, {PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0}});
    return any;
  }();
  return calls;
}

// The standby child: joins its cgroup, with `filter_ahead` installs the seccomp program, says so ("J"), and waits
// for its request: the ExecRequest, then stdin, stdout, stderr and the report pipe's write end. Never returns.
[[noreturn]] void wait_as_standby(int channel, const std::vector<int>& cgroup_fds,
                                  const std::vector<std::uint8_t>& program, bool filter_ahead) {
  // Init's blocked signals unblocked: a signal sent to it while it waits (a `kill -TERM -1` in the box) ends it
  // now, and its exec forks anew, instead of killing that exec once it unblocks them.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  bool joined = true;
  for (int fd : cgroup_fds) joined = write(fd, "0", 1) == 1 && joined;
  for (int fd : cgroup_fds) close(fd);
  if (!joined) _exit(1);  // outside its leaf a timeout could not reach what it starts: its exec forks anew
  if (prefer_for_oom_kill() != 0) _exit(1);  // its exec forks anew, and reports the failure there
  try {
    drop_capability_bounds();  // the same for every request: off the exec's path
  } catch (const SandboxError&) {
    _exit(1);  // its exec forks anew, and drops them there
  }
  if (filter_ahead) {
    try {
      set_no_new_privs();
    } catch (const SandboxError&) {
      _exit(1);
    }
    if (install_seccomp_program(program) != 0) _exit(1);  // its exec forks anew, and installs it there
  }
  (void)!send(channel, "J", 1, MSG_NOSIGNAL);
  try {
    const std::optional<std::string> message = receive_message(channel);
    if (!message) _exit(0);  // never used: the box or the exec ended first
    const ExecRequest request = decode_exec_request(*message);
    int fds[4];
    for (int& fd : fds) fd = receive_fd(channel);
    for (int target = 0; target < 3; ++target) {
      if (dup2(fds[target], target) < 0) _exit(127);
    }
    close(channel);
    static const std::vector<std::uint8_t> kInstalled;  // an empty program: nothing left to install
    run_command(request, filter_ahead ? kInstalled : program, fds[3], {}, InitLeftovers::kDropped);
  } catch (const SandboxError&) {
    _exit(127);
  }
}

class ExecServer {
 public:
  ExecServer(const InitConfig& config, const std::vector<std::uint8_t>& program, int signal_fd)
      : config_(config), program_(program), signal_fd_(signal_fd),
        filter_ahead_(!program.empty() && allows_calls(program, standby_calls_under_filter())) {}

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
      // The daemon is gone: nobody can reach a session any more, nor hand a waiting one-shot box (a pooled one)
      // its exec.
      if (config_.session || execs_.empty()) end_box();
      return;
    }
    ExecRequest request;
    std::vector<int> fds;
    try {
      request = decode_exec_request(*message);
      const std::size_t stdio = request.op == init_op::kPrepare ? 0 : 3;
      for (std::size_t i = 0; i < stdio + request.cgroup_fds; ++i) fds.push_back(receive_fd(kInitControlFd));
    } catch (const SandboxError& e) {
      for (int fd : fds) close(fd);
      if (request.op == init_op::kPrepare) return;  // the exec comes without `prepared`, or fails then
      send_init_error(request.id, e.cause());
      send_init_event({{"event", init_event::kExited}, {"id", request.id}, {"code", 127}});
      return;
    }
    if (request.op == init_op::kPrepare) return prepare(request.id, std::move(fds));
    if (request.prepared) return start_prepared(request, fds);
    start(request, fds);
    for (int fd : fds) close(fd);
  }

  void prepare(std::uint64_t id, std::vector<int> cgroup_fds) {
    if (standby_.count(id) != 0) {
      for (int fd : cgroup_fds) close(fd);
      return;
    }
    // The launcher prepares one exec at a time and sends exec N before prepare N+1: an older standby is one whose
    // exec never came (it failed in the launcher before its request was sent).
    for (auto it = standby_.begin(); it != standby_.end();) {
      if (it->first >= id) break;
      discard(it->second);
      it = standby_.erase(it);
    }
    Standby& standby = standby_[id];  // pid -1 (no child) when a step fails: the exec forks then
    standby.cgroup_fds = std::move(cgroup_fds);
    std::pair<int, int> pair;
    try {
      pair = make_channel();  // its buffer takes the largest request, as the control channel's does
    } catch (const SandboxError&) {
      return;
    }
    const pid_t child = fork();
    if (child == 0) {
      close(pair.first);
      wait_as_standby(pair.second, standby.cgroup_fds, program_, filter_ahead_);
    }
    close(pair.second);
    standby.pid = child;
    standby.channel = child > 0 ? pair.first : -1;
    if (child < 0) close(pair.first);
  }

  static void discard(Standby& standby) {
    if (standby.pid > 0) kill(standby.pid, SIGKILL);
    if (standby.channel >= 0) close(standby.channel);
    for (int fd : standby.cgroup_fds) close(fd);
  }

  // Hands the request to the standby child of its id; forks anew (with the kept cgroup descriptors) when that
  // child is gone, stopped or signalled. Never blocks: the sends do not wait, and the buffer takes any request.
  void start_prepared(const ExecRequest& request, const std::vector<int>& stdio) {
    auto it = standby_.find(request.id);
    if (it == standby_.end()) {
      for (int fd : stdio) close(fd);
      errno = ENOENT;
      return fail_to_start(request.id, "no prepared child for this exec");
    }
    Standby standby = std::move(it->second);
    standby_.erase(it);
    bool handed = false;
    int report[2] = {-1, -1};
    if (standby.pid > 0 && standby_is_quiet(standby.pid) && pipe2(report, O_CLOEXEC) == 0) {
      try {
        send_message(standby.channel, encode_exec_request(request), false);
        for (int fd : stdio) send_fd(standby.channel, fd, false);
        send_fd(standby.channel, report[1], false);
        handed = true;
      } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): it died; fork anew below
      }
    }
    if (handed) {
      // It joined its cgroup unless it said nothing yet (stopped first, or still joining): then init moves it.
      char joined = 0;
      if (recv(standby.channel, &joined, 1, MSG_DONTWAIT) != 1 || joined != 'J') move_into(standby.pid, standby.cgroup_fds);
      close(report[1]);
      track(request, standby.pid, report[0]);
      execs_[standby.pid].standby_channel = standby.channel;
      standby.channel = -1;
    } else {
      if (report[0] >= 0) close(report[0]);
      if (report[1] >= 0) close(report[1]);
      if (standby.pid > 0) kill(standby.pid, SIGKILL);
      std::vector<int> fds = stdio;
      fds.insert(fds.end(), standby.cgroup_fds.begin(), standby.cgroup_fds.end());
      start(request, fds);  // all of them are closed below
    }
    if (standby.channel >= 0) close(standby.channel);
    for (int fd : standby.cgroup_fds) close(fd);
    for (int fd : stdio) close(fd);
  }

  static void move_into(pid_t pid, const std::vector<int>& cgroup_fds) {
    const std::string text = std::to_string(pid);
    for (int fd : cgroup_fds) {
      ssize_t ignored = write(fd, text.data(), text.size());
      (void)ignored;
    }
  }

  void track(const ExecRequest& request, pid_t child, int report_fd) {
    fcntl(report_fd, F_SETFL, O_NONBLOCK);
    LiveExec& exec = execs_[child];
    exec.id = request.id;
    exec.ends_sandbox = request.ends_sandbox;
    exec.report_fd = report_fd;
    if (request.ends_sandbox && request.watchdog_ns != 0) watchdog_.arm(request.watchdog_ns, request.kill_grace_ms);
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
    move_into(child, std::vector<int>(fds.begin() + 3, fds.end()));
    track(request, child, report[0]);
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
      if (it == execs_.end()) {
        for (auto& [id, standby] : standby_) {
          if (standby.pid == reaped) standby.pid = -1;  // died unused: its exec forks anew
        }
        continue;
      }
      // Its reports first, so that "exec" or "error" precede "exited" (its writer died with it: all is there).
      if (it->second.report_fd >= 0) read_reports(it->second);
      if (it->second.report_fd >= 0) close(it->second.report_fd);
      if (it->second.standby_channel >= 0) close(it->second.standby_channel);
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
  const bool filter_ahead_;  // the standbys install the program before their request (standby_calls_under_filter)
  bool control_open_ = true;
  std::map<pid_t, LiveExec> execs_;
  std::map<std::uint64_t, Standby> standby_;  // by exec id
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

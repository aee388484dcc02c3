// The per-sandbox poll loop: relays output, reads init's events, and ends the sandbox on wall time,
// CPU time or cancellation with SIGTERM, a grace period, then SIGKILL of init and the whole cgroup.
#include "sandbox/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "sandbox/channel.h"
#include "sandbox/command.h"
#include "sandbox/init_config.h"

namespace capsule::sandbox {
namespace {

constexpr std::int64_t kMs = 1000000;
constexpr std::int64_t kCpuPollNs = 50 * kMs;
constexpr std::int64_t kCancelPollNs = 50 * kMs;
constexpr std::int64_t kDrainLimitNs = 5000 * kMs;  // after init exits, pipes close within this

void send_signal(int pidfd, int signo) { syscall(SYS_pidfd_send_signal, pidfd, signo, nullptr, 0); }

}  // namespace

Supervisor::Supervisor(const SupervisedFds& fds, Cgroup& cgroup, const Limits& limits, RunHooks hooks,
                       std::string stdin_data, std::int64_t start_ns, OutputCapture& out, OutputCapture& err)
    : fds_(fds), cgroup_(cgroup), limits_(limits), hooks_(std::move(hooks)), out_(out), err_(err),
      stdin_data_(std::move(stdin_data)) {
  if (limits_.wall_time.count() > 0) wall_deadline_ = start_ns + static_cast<std::int64_t>(limits_.wall_time.count()) * kMs;
  if (limits_.cpu_time.count() > 0) next_cpu_check_ = start_ns + kCpuPollNs;
  if (fds_.stdin_write >= 0) feed_stdin();
}

Supervisor::~Supervisor() { close_fds(); }

void Supervisor::handle_event(const std::string& message) {
  nlohmann::json event = nlohmann::json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) return;
  const std::string name = event.value("event", "");
  if (name == init_event::kReady) {
    outcome_.ready_ns = event.value("t_ns", std::int64_t{0});
  } else if (name == init_event::kExec) {
    outcome_.exec_ns = event.value("t_ns", std::int64_t{0});
    outcome_.seccomp_ns = event.value("seccomp_t_ns", std::int64_t{0});
  } else if (name == init_event::kError) {
    outcome_.setup_error = base::Cause{event.value("step", ""), event.value("path", ""), event.value("errno", 0),
                                      event.value("detail", "")};
  } else if (name == init_event::kExited) {
    if (event.contains("signal")) outcome_.exit_signal = event.value("signal", 0);
    if (event.contains("code")) outcome_.exit_code = event.value("code", 0);
  }
}

void Supervisor::start_termination(std::int64_t now) {
  if (kill_at_ns_ || killed_) return;
  send_signal(fds_.pidfd, SIGTERM);  // init forwards it to every process in the sandbox
  kill_at_ns_ = now + static_cast<std::int64_t>(limits_.kill_grace.count()) * kMs;
}

void Supervisor::escalate_to_kill() {
  killed_ = true;
  kill_at_ns_.reset();
  send_signal(fds_.pidfd, SIGKILL);  // the pid namespace dies with its init
  cgroup_.kill_all();                // and anything that slipped into the cgroup otherwise
}

void Supervisor::feed_stdin() {
  while (stdin_offset_ < stdin_data_.size()) {
    ssize_t sent = send(fds_.stdin_write, stdin_data_.data() + stdin_offset_, stdin_data_.size() - stdin_offset_,
                        MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      break;  // the command closed stdin: the rest is dropped
    }
    stdin_offset_ += static_cast<std::size_t>(sent);
  }
  close(fds_.stdin_write);
  fds_.stdin_write = -1;
}

bool Supervisor::finished() const {
  return !init_alive_ && fds_.control < 0 && fds_.stdout_read < 0 && fds_.stderr_read < 0;
}

std::vector<pollfd> Supervisor::interest() const {
  std::vector<pollfd> wanted;
  if (init_alive_) wanted.push_back({fds_.pidfd, POLLIN, 0});
  for (int fd : {fds_.control, fds_.stdout_read, fds_.stderr_read}) {
    if (fd >= 0) wanted.push_back({fd, POLLIN, 0});
  }
  if (fds_.stdin_write >= 0) wanted.push_back({fds_.stdin_write, POLLOUT, 0});
  return wanted;
}

std::int64_t Supervisor::next_deadline() const {
  if (!init_alive_) return finished() ? 0 : drain_deadline_;
  std::int64_t wake = 0;
  auto consider = [&](std::int64_t t) {
    if (t > 0 && (wake == 0 || t < wake)) wake = t;
  };
  if (!outcome_.wall_timeout && !outcome_.cancelled) consider(wall_deadline_);
  if (kill_at_ns_) consider(*kill_at_ns_);
  consider(next_cpu_check_);
  if (hooks_.cancel != nullptr && !outcome_.cancelled) consider(monotonic_ns() + kCancelPollNs);
  return wake;
}

void Supervisor::cancel() {
  if (!init_alive_ || outcome_.cancelled) return;
  outcome_.cancelled = true;
  start_termination(monotonic_ns());
}

void Supervisor::tick(std::int64_t now) {
  if (!init_alive_) {
    if (now >= drain_deadline_) close_fds();  // a pipe held open by something outside: stop waiting
    return;
  }
  if (hooks_.cancel != nullptr && hooks_.cancel->load()) cancel();
  const bool ending = outcome_.wall_timeout || outcome_.cpu_timeout || outcome_.cancelled;
  if (wall_deadline_ != 0 && now >= wall_deadline_ && !ending) {
    outcome_.wall_timeout = true;
    start_termination(now);
  }
  if (next_cpu_check_ != 0 && now >= next_cpu_check_) {
    next_cpu_check_ = now + kCpuPollNs;
    CgroupUsage usage = cgroup_.usage();
    const auto cpu_limit_ns = static_cast<std::int64_t>(limits_.cpu_time.count()) * kMs;
    if (static_cast<std::int64_t>(usage.cpu_user_ns + usage.cpu_sys_ns) >= cpu_limit_ns && !ending &&
        !outcome_.wall_timeout) {
      outcome_.cpu_timeout = true;
      start_termination(now);
    }
  }
  if (kill_at_ns_ && now >= *kill_at_ns_) escalate_to_kill();
}

void Supervisor::handle(int fd, short revents) {
  if (revents == 0 || fd < 0) return;
  if (fd == fds_.pidfd && init_alive_) {
    siginfo_t info{};
    if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(fds_.pidfd), &info, WEXITED | __WALL) == 0) {
      outcome_.init_wait_code = info.si_code;
      outcome_.init_wait_status = info.si_status;
    }
    outcome_.end_ns = monotonic_ns();
    init_alive_ = false;
    kill_at_ns_.reset();
    next_cpu_check_ = 0;
    drain_deadline_ = outcome_.end_ns + kDrainLimitNs;  // the pid namespace died with init
  } else if (fd == fds_.control) {
    auto message = receive_message(fds_.control);
    if (message) {
      handle_event(*message);
    } else {
      close(fds_.control);
      fds_.control = -1;
    }
  } else if (fd == fds_.stdin_write) {
    feed_stdin();
  } else if (fd == fds_.stdout_read) {
    read_output(fds_.stdout_read, true);
  } else if (fd == fds_.stderr_read) {
    read_output(fds_.stderr_read, false);
  }
}

void Supervisor::read_output(int& fd, bool is_stdout) {
  char buffer[65536];
  ssize_t got = read(fd, buffer, sizeof buffer);
  if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (got <= 0) {
    close(fd);
    fd = -1;
    return;
  }
  std::string_view chunk(buffer, static_cast<std::size_t>(got));
  (is_stdout ? out_ : err_).append(chunk);
  if (hooks_.on_output) hooks_.on_output(is_stdout ? OutputStream::kStdout : OutputStream::kStderr, chunk);
}

const Outcome& Supervisor::run() {
  while (!finished()) {
    std::vector<pollfd> wanted = interest();
    const std::int64_t deadline = next_deadline();
    const std::int64_t now = monotonic_ns();
    int timeout_ms = deadline == 0 ? -1 : static_cast<int>(std::max<std::int64_t>(0, (deadline - now + kMs - 1) / kMs));
    int ready = poll(wanted.data(), static_cast<nfds_t>(wanted.size()), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw_errno("supervise", "", "poll");
    }
    for (const pollfd& p : wanted) handle(p.fd, p.revents);
    tick(monotonic_ns());
  }
  return outcome_;
}

void Supervisor::close_fds() {
  for (int* fd : {&fds_.control, &fds_.stdout_read, &fds_.stderr_read, &fds_.stdin_write}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

}  // namespace capsule::sandbox

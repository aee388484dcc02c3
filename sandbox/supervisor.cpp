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

Supervisor::Supervisor(const SupervisedFds& fds, Cgroup& cgroup, const Limits& limits, const RunHooks& hooks,
                       std::string stdin_data, std::int64_t start_ns)
    : fds_(fds), cgroup_(cgroup), limits_(limits), hooks_(hooks), stdin_data_(std::move(stdin_data)),
      start_ns_(start_ns) {}

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
    outcome_.setup_error = ErrorCause{event.value("step", ""), event.value("path", ""), event.value("errno", 0),
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

Outcome Supervisor::run(OutputCapture& out, OutputCapture& err) {
  const std::int64_t wall_deadline =
      limits_.wall_time.count() > 0 ? start_ns_ + static_cast<std::int64_t>(limits_.wall_time.count()) * kMs : 0;
  const std::int64_t cpu_limit_ns = static_cast<std::int64_t>(limits_.cpu_time.count()) * kMs;
  std::int64_t next_cpu_check = start_ns_ + kCpuPollNs;
  bool init_alive = true;
  std::int64_t drain_deadline = 0;
  char buffer[65536];

  if (fds_.stdin_write >= 0) feed_stdin();
  for (;;) {
    const std::int64_t now = monotonic_ns();
    if (init_alive) {
      if (hooks_.cancel != nullptr && hooks_.cancel->load() && !outcome_.cancelled) {
        outcome_.cancelled = true;
        start_termination(now);
      }
      if (wall_deadline != 0 && now >= wall_deadline && !outcome_.wall_timeout && !outcome_.cancelled) {
        outcome_.wall_timeout = true;
        start_termination(now);
      }
      if (cpu_limit_ns > 0 && now >= next_cpu_check) {
        next_cpu_check = now + kCpuPollNs;
        CgroupUsage usage = cgroup_.usage();
        if (static_cast<std::int64_t>(usage.cpu_user_ns + usage.cpu_sys_ns) >= cpu_limit_ns &&
            !outcome_.cpu_timeout && !outcome_.wall_timeout && !outcome_.cancelled) {
          outcome_.cpu_timeout = true;
          start_termination(now);
        }
      }
      if (kill_at_ns_ && now >= *kill_at_ns_) escalate_to_kill();
    } else if (now >= drain_deadline) {
      break;
    }

    pollfd polled[5];
    int count = 0;
    auto watch = [&](int fd, short events) {
      if (fd >= 0) polled[count++] = pollfd{fd, events, 0};
    };
    watch(init_alive ? fds_.pidfd : -1, POLLIN);
    watch(fds_.control, POLLIN);
    watch(fds_.stdout_read, POLLIN);
    watch(fds_.stderr_read, POLLIN);
    watch(fds_.stdin_write, POLLOUT);
    if (!init_alive && fds_.control < 0 && fds_.stdout_read < 0 && fds_.stderr_read < 0) break;

    std::int64_t wake = init_alive ? 0 : drain_deadline;
    auto consider = [&](std::int64_t t) {
      if (t > 0 && (wake == 0 || t < wake)) wake = t;
    };
    if (init_alive) {
      consider(wall_deadline);
      if (kill_at_ns_) consider(*kill_at_ns_);
      if (cpu_limit_ns > 0) consider(next_cpu_check);
      if (hooks_.cancel != nullptr) consider(now + kCancelPollNs);
    }
    int timeout_ms = wake == 0 ? -1 : static_cast<int>(std::max<std::int64_t>(0, (wake - now + kMs - 1) / kMs));
    int ready = poll(polled, static_cast<nfds_t>(count), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw_errno("supervise", "", "poll");
    }

    for (int i = 0; i < count; ++i) {
      if (polled[i].revents == 0) continue;
      const int fd = polled[i].fd;
      if (fd == fds_.pidfd) {
        siginfo_t info{};
        if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(fds_.pidfd), &info, WEXITED | __WALL) == 0) {
          outcome_.init_wait_code = info.si_code;
          outcome_.init_wait_status = info.si_status;
        }
        outcome_.end_ns = monotonic_ns();
        init_alive = false;
        drain_deadline = outcome_.end_ns + kDrainLimitNs;  // the pid namespace died with init
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
      } else {
        const bool is_stdout = fd == fds_.stdout_read;
        ssize_t got = read(fd, buffer, sizeof buffer);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) {
          close(fd);
          (is_stdout ? fds_.stdout_read : fds_.stderr_read) = -1;
          continue;
        }
        std::string_view chunk(buffer, static_cast<std::size_t>(got));
        (is_stdout ? out : err).append(chunk);
        if (hooks_.on_output) hooks_.on_output(is_stdout ? OutputStream::kStdout : OutputStream::kStderr, chunk);
      }
    }
  }
  close_fds();
  return outcome_;
}

Supervisor::~Supervisor() { close_fds(); }

void Supervisor::close_fds() {
  for (int* fd : {&fds_.control, &fds_.stdout_read, &fds_.stderr_read, &fds_.stdin_write}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

}  // namespace capsule::sandbox

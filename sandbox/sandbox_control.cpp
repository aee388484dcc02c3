// A live box's event plumbing (init's pidfd and control channel, its events routed to their execs) and the
// verbs on the whole box: signal, freeze, thaw, usage, its root for file operations.
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sandbox/channel.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/init_config.h"
#include "sandbox/sandbox.h"

namespace capsule::sandbox {

std::vector<pollfd> Sandbox::interest() const {
  std::vector<pollfd> wanted;
  if (init_alive_) wanted.push_back({pidfd_, POLLIN, 0});
  if (control_ >= 0) wanted.push_back({control_, POLLIN, 0});
  return wanted;
}

void Sandbox::handle(int fd, short revents) {
  if (revents == 0 || fd < 0) return;
  if (fd == control_) {
    std::optional<std::string> message;
    try {
      message = receive_message(control_);
    } catch (const SandboxError&) {
      message.reset();  // a broken channel is an ended one
    }
    if (message) {
      route_event(*message);
      return;
    }
    close(control_);
    control_ = -1;
    if (!init_alive_) lost_init();
  } else if (fd == pidfd_ && init_alive_) {
    siginfo_t info{};
    if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info, WEXITED | __WALL) == 0) {
      init_wait_code_ = info.si_code;
      init_wait_status_ = info.si_status;
    }
    init_alive_ = false;
    // Init's last events may still be queued on the channel: they are read before the execs are told.
    if (control_ < 0) lost_init();
  }
}

// Init is gone and its channel drained: every exec still running has ended with the box.
void Sandbox::lost_init() {
  std::vector<Exec*> live;
  for (const auto& [id, exec] : execs_) live.push_back(exec);
  for (Exec* exec : live) exec->ended(true);
}

void Sandbox::route_event(const std::string& message) {
  nlohmann::json event = nlohmann::json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) return;
  const std::string name = event.value("event", "");
  const std::uint64_t id = event.value("id", std::uint64_t{0});
  if (name == init_event::kReady) {
    // Init has left the box's own cgroup directory by now (v2): the exec leaves can carry the box's limits.
    try {
      cgroup_->hand_limits_to_children();
    } catch (const SandboxError& e) {
      if (!setup_error_) setup_error_ = e.cause();
    }
    times_.ready = event.value("t_ns", std::int64_t{0});
    return;
  }
  auto cause = [&] {
    return base::Cause{event.value("step", ""), event.value("path", ""), event.value("errno", 0),
                       event.value("detail", "")};
  };
  if (id == 0) {
    if (name == init_event::kError && !setup_error_) setup_error_ = cause();
    return;
  }
  auto it = execs_.find(id);
  if (it == execs_.end()) return;  // an exec already destroyed
  Exec& exec = *it->second;
  if (name == init_event::kExec) {
    exec.outcome_.exec_ns = event.value("t_ns", std::int64_t{0});
    exec.outcome_.seccomp_ns = event.value("seccomp_t_ns", std::int64_t{0});
    exec.started();
  } else if (name == init_event::kError) {
    exec.outcome_.setup_error = cause();
  } else if (name == init_event::kExited) {
    if (event.contains("signal")) exec.outcome_.exit_signal = event.value("signal", 0);
    if (event.contains("code")) exec.outcome_.exit_code = event.value("code", 0);
    exec.ended(false);
  }
}

void Sandbox::signal(int signo) {
  if (destroyed_) return;
  for (pid_t pid : cgroup_->processes()) {
    if (pid != init_pid_) kill(pid, signo);
  }
}

void Sandbox::kill_init() {
  if (init_alive_) syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);
}

void Sandbox::freeze() {
  if (destroyed_ || frozen_) return;
  cgroup_->freeze(true);
  frozen_ = true;
}

void Sandbox::thaw() {
  if (destroyed_ || !frozen_) return;
  cgroup_->freeze(false);
  frozen_ = false;
}

CgroupUsage Sandbox::usage() const {
  if (destroyed_) throw_error("usage", "", "the sandbox was destroyed");
  return cgroup_->usage();
}

std::uint64_t Sandbox::oom_kills() const {
  if (destroyed_) throw_error("usage", "", "the sandbox was destroyed");
  return cgroup_->oom_kills();
}

base::UniqueFd Sandbox::open_root() const {
  if (destroyed_ || !init_alive_) throw_error("root", "", "the sandbox has ended");
  const std::string path = "/proc/" + std::to_string(init_pid_) + "/root";
  base::UniqueFd root(open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) throw_errno("root", path, "open");
  return root;
}

}  // namespace capsule::sandbox

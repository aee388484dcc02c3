// run_tool_as: fork, drop to the caller with raw syscalls (only this thread exists in the child), exec; the
// parent copies stdout into the given file, keeps the tail of stderr, and kills the tool's process group on a
// limit or the timeout.
#include "daemon/snapshots/caller_tool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "base/unique_fd.h"
#include "http/response.h"

namespace capsule::daemon {
namespace {

constexpr std::size_t kStderrTail = 4096;

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void exec_child(const Caller& caller, const gid_t* groups, std::size_t group_count, int cwd_fd,
                             int null_fd, int out_fd, int err_fd, char* const* argv, char* const* envp) {
  setpgid(0, 0);
  if (dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(126);
  if (cwd_fd >= 0 && fchdir(cwd_fd) != 0) _exit(126);
  // The tool runs as the caller, who may ptrace it: none of the daemon's descriptors may reach it.
  if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) _exit(126);
  if (!caller.is_root()) {
    if (syscall(SYS_setgroups, group_count, groups) != 0 ||
        syscall(SYS_setresgid, caller.gid, caller.gid, caller.gid) != 0 ||
        syscall(SYS_setresuid, caller.uid, caller.uid, caller.uid) != 0) {
      _exit(126);
    }
    // Until execve replaces it, this process holds a copy of the daemon's memory: not the caller's to inspect.
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  execve(argv[0], argv, envp);
  _exit(127);
}

void kill_group(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
}

// The tool's exit status. A tool the caller ptraces may not be reported to us (its tracer sees it first): after
// `patience` the tool is killed and left to a detached thread to reap, and nullopt says it gave no status.
std::optional<int> reap(pid_t pid, std::chrono::milliseconds patience) {
  const auto give_up = std::chrono::steady_clock::now() + patience;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return status;
    if (done < 0 && errno != EINTR) return std::nullopt;
    if (std::chrono::steady_clock::now() >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill_group(pid);
  std::thread([pid] {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }).detach();
  return std::nullopt;
}

}  // namespace

ToolOutcome run_tool_as(const Caller& caller, const CallerTool& tool) {
  if (!caller.known) throw http::ApiError("forbidden", caller.describe() + " may not read host paths");
  std::vector<std::string> argv = tool.argv;
  std::vector<std::string> env = tool.env;
  std::vector<char*> argv_p = pointers(argv);
  std::vector<char*> env_p = pointers(env);
  std::vector<gid_t> groups = caller.groups;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) throw http::ApiError("internal_error", std::string("pipe: ") + std::strerror(errno));
  base::UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw http::ApiError("internal_error", std::string("pipe: ") + std::strerror(errno));
  base::UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);
  base::UniqueFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd) throw http::ApiError("internal_error", std::string("/dev/null: ") + std::strerror(errno));

  const pid_t pid = fork();
  if (pid < 0) throw http::ApiError("internal_error", std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    exec_child(caller, groups.data(), groups.size(), tool.cwd_fd, null_fd.get(), out_write.get(), err_write.get(),
               argv_p.data(), env_p.data());
  }
  setpgid(pid, pid);  // as the child does itself: whichever runs first
  out_write.reset();
  err_write.reset();

  ToolOutcome outcome;
  std::string failure;  // set when the tool is stopped
  std::string failure_code;
  std::uint64_t written = 0;
  const auto deadline = std::chrono::steady_clock::now() + tool.timeout;
  std::vector<char> buffer(1 << 16);
  while ((out_read || err_read) && failure.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      failure_code = "snapshot_source_failed";
      failure = argv[0] + " gave no result within " + std::to_string(tool.timeout.count()) + " s";
      break;
    }
    pollfd fds[2] = {{out_read ? out_read.get() : -1, POLLIN, 0}, {err_read ? err_read.get() : -1, POLLIN, 0}};
    const int ready = poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) {
      failure_code = "internal_error";
      failure = std::string("poll: ") + std::strerror(errno);
    }
    if (ready <= 0) continue;
    if (fds[0].revents != 0) {
      const ssize_t n = read(out_read.get(), buffer.data(), buffer.size());
      if (n <= 0) {
        if (n == 0 || errno != EINTR) out_read.reset();
      } else if ((written += static_cast<std::uint64_t>(n)) > tool.max_stdout) {
        failure_code = "snapshot_too_large";
        failure = "the source is larger than " + tool.limit_name;
      } else if (tool.stdout_sink) {
        tool.stdout_sink(buffer.data(), static_cast<std::size_t>(n));
      } else {
        for (ssize_t done = 0; done < n;) {
          const ssize_t w = write(tool.stdout_fd, buffer.data() + done, static_cast<std::size_t>(n - done));
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) {
            failure_code = base::is_out_of_space(errno) ? "insufficient_storage" : "internal_error";  // staging is full
            failure = std::string("writing the source tar: ") + std::strerror(errno);
            break;
          }
          done += w;
        }
      }
    }
    if (fds[1].revents != 0) {
      const ssize_t n = read(err_read.get(), buffer.data(), buffer.size());
      if (n <= 0) {
        if (n == 0 || errno != EINTR) err_read.reset();
      } else {
        outcome.stderr_tail.append(buffer.data(), static_cast<std::size_t>(n));
        if (outcome.stderr_tail.size() > kStderrTail) outcome.stderr_tail.erase(0, outcome.stderr_tail.size() - kStderrTail);
      }
    }
  }
  if (!failure.empty()) kill_group(pid);
  // Its output is closed: it has exited or is about to (or was killed just now).
  const std::optional<int> reaped = reap(pid, std::chrono::seconds(5));
  if (!failure.empty()) throw http::ApiError(failure_code, failure);
  if (!reaped) throw http::ApiError("snapshot_source_failed", argv[0] + " closed its output but did not exit");
  const int status = *reaped;
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (outcome.exit_code == 126 || outcome.exit_code == 127) {
    throw http::ApiError("snapshot_source_failed", argv[0] + " could not be started as " + caller.describe() +
                                                       (outcome.stderr_tail.empty() ? "" : ": " + outcome.stderr_tail));
  }
  return outcome;
}

}  // namespace capsule::daemon

// Runs in the forked command process inside the sandbox: resets what init changed, drops every
// privilege, installs the seccomp filter last and execs. Failures are reported, then exit 127.
#include "sandbox/command.h"

#include <linux/close_range.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sandbox/caps.h"
#include "sandbox/error.h"
#include "sandbox/oom_guard.h"
#include "sandbox/rlimits.h"
#include "sandbox/seccomp.h"

namespace capsule::sandbox {
namespace {

void write_report(int fd, const CommandReport& report) {
  ssize_t ignored = write(fd, &report, sizeof report);
  (void)ignored;
}

[[noreturn]] void fail(int fd, const char* step, const std::string& path, int error) {
  CommandReport report;
  report.t_ns = monotonic_ns();
  report.error = error == 0 ? EINVAL : error;
  std::strncpy(report.step, step, sizeof report.step - 1);
  std::strncpy(report.path, path.c_str(), sizeof report.path - 1);
  write_report(fd, report);
  _exit(127);
}

std::string env_value(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& entry : env) {
    if (entry.compare(0, name.size() + 1, name + "=") == 0) return entry.substr(name.size() + 1);
  }
  return {};
}

// execvp semantics, but with PATH from the command's environment rather than init's.
std::string resolve_executable(const std::string& name, const std::vector<std::string>& env, int* error) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = env_value(env, "PATH");
  if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
  *error = ENOENT;
  for (std::size_t start = 0; start <= path.size();) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
      *error = EACCES;
    }
    start = end + 1;
  }
  return {};
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void run_command(const ExecRequest& config, const std::vector<std::uint8_t>& seccomp_program, int report_fd,
                 const std::vector<int>& cgroup_fds, InitLeftovers leftovers) {
  for (int fd : cgroup_fds) {
    if (write(fd, "0", 1) != 1) fail(report_fd, "cgroup", "cgroup.procs", errno);
    close(fd);
  }
  if (leftovers == InitLeftovers::kToDrop) {
    if (const int error = prefer_for_oom_kill(); error != 0) fail(report_fd, "oom", "/proc/self/oom_score_adj", error);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setsid();
  if (config.controlling_tty && ioctl(0, TIOCSCTTY, 0) != 0) fail(report_fd, "tty", "TIOCSCTTY", errno);
  try {
    apply_rlimits(RlimitSettings{config.nofile, config.fsize_bytes, config.stack_bytes});
    if (leftovers == InitLeftovers::kToDrop) drop_capability_bounds();
    drop_privileges(config.uid, config.gid);
    set_no_new_privs();
  } catch (const SandboxError& e) {
    fail(report_fd, e.cause().step.c_str(), e.cause().path, e.cause().errno_value);
  }
  if (chdir(config.cwd.c_str()) != 0) fail(report_fd, "chdir", config.cwd, errno);

  int resolve_error = 0;
  std::string executable = resolve_executable(config.argv.at(0), config.env, &resolve_error);
  if (executable.empty()) fail(report_fd, "exec", config.argv[0], resolve_error);
  std::vector<char*> argv = c_strings(config.argv);
  std::vector<char*> envp = c_strings(config.env);
  if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) fail(report_fd, "close_range", "", errno);

  CommandReport ready;
  ready.t_ns = monotonic_ns();
  write_report(report_fd, ready);
  if (!seccomp_program.empty()) {
    int error = install_seccomp_program(seccomp_program);
    if (error != 0) fail(report_fd, "seccomp", "", error);
  }
  execve(executable.c_str(), argv.data(), envp.data());
  fail(report_fd, "exec", executable, errno);
}

}  // namespace capsule::sandbox

// ExecRequest: what the launcher asks capsule-init to run, sent over the control channel after the InitConfig,
// followed by its descriptors: stdin, stdout, stderr, then one cgroup.procs per hierarchy of the exec's cgroup.
// A "prepare" request (only id and cgroup_fds, then those descriptors) has init fork a standby child that joins
// that cgroup ahead of time; the "exec" request of the same id with `prepared` then runs in it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace capsule::sandbox {

// Messages from the launcher to init, after the config: {"op": NAME, ...}.
namespace init_op {
inline constexpr const char* kExec = "exec";        // an ExecRequest, then its descriptors
inline constexpr const char* kPrepare = "prepare";  // id and cgroup_fds, then the cgroup.procs descriptors
}  // namespace init_op

struct ExecRequest {
  std::string op = init_op::kExec;
  std::uint64_t id = 0;                 // unique within the sandbox; init's events about it carry it
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd = "/";
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::uint64_t nofile = 0;
  std::uint64_t fsize_bytes = 0;
  std::uint64_t stack_bytes = 0;
  std::size_t cgroup_fds = 0;           // cgroup.procs descriptors after the three stdio ones
  bool prepared = false;                // runs in the standby child of this id's "prepare" (no cgroup_fds)
  bool controlling_tty = false;         // stdin is a pty slave: make it the controlling tty
  // A one-shot sandbox ends with this process: init then kills everything, reports and exits.
  bool ends_sandbox = false;
  // The wall-time watchdog of a one-shot box, for when capsuled is not there to enforce it (crashed,
  // restarting): at this CLOCK_MONOTONIC instant (0: none) init sends SIGTERM to everything, SIGKILL
  // kill_grace_ms later, unless the launcher already ended it.
  std::int64_t watchdog_ns = 0;
  std::int64_t kill_grace_ms = 0;
};

std::string encode_exec_request(const ExecRequest& request);
ExecRequest decode_exec_request(const std::string& text);  // throws SandboxError (step "exec-request")

}  // namespace capsule::sandbox

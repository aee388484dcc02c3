// The command's side of the sandbox: the child capsule-init forks, which drops everything and execs.
// Order: own cgroup, signals reset, new session, rlimits, ids and capabilities, cwd, no_new_privs, seccomp, execve.
#pragma once

#include <cstdint>
#include <vector>

#include "sandbox/exec_request.h"

namespace capsule::sandbox {

// What the command reports through its close-on-exec pipe: one record before the seccomp filter goes
// on and, only if execve fails, a second one with the error. EOF after the first means exec succeeded.
struct CommandReport {
  std::int64_t t_ns = 0;  // CLOCK_MONOTONIC
  int error = 0;          // errno of the failed step, 0 for the first record
  char step[32] = {};
  char path[224] = {};
};

// What the calling child still has of init's: all of it (forked for this exec), or neither its bounding and
// ambient capabilities nor its OOM score (a standby changed those while it waited: they depend on no request).
enum class InitLeftovers { kToDrop, kDropped };

// Never returns. `report_fd` is the write end of the report pipe (close-on-exec); `cgroup_fds` are the
// exec's cgroup.procs descriptors, joined ("0") first, so everything the command starts stays in that group.
[[noreturn]] void run_command(const ExecRequest& request, const std::vector<std::uint8_t>& seccomp_program,
                              int report_fd, const std::vector<int>& cgroup_fds,
                              InitLeftovers leftovers = InitLeftovers::kToDrop);

std::int64_t monotonic_ns();

}  // namespace capsule::sandbox

// Resource limits (setrlimit) applied to the command: open files, core dumps, file size, stack.
// Whole-sandbox memory, pids and CPU are cgroup limits, not rlimits.
#pragma once

#include <cstdint>

namespace capsule::sandbox {

struct RlimitSettings {
  std::uint64_t nofile = 0;       // 0: leave as is
  std::uint64_t fsize_bytes = 0;  // 0: unlimited
  std::uint64_t stack_bytes = 0;  // 0: leave as is
};

// Core dumps are always disabled. Throws SandboxError (step "rlimits").
void apply_rlimits(const RlimitSettings& settings);

}  // namespace capsule::sandbox

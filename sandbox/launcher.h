// Launcher: turns a SandboxSpec into a confined, supervised process tree and returns its Result.
// Thread-safe and re-entrant: many threads may call run() at once (no process-global state).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "sandbox/cgroup.h"
#include "sandbox/result.h"
#include "sandbox/spec.h"

namespace capsule::sandbox {

struct LauncherOptions {
  std::string init_binary;                            // empty: capsule-init next to this executable
  std::string scratch_dir = "/var/lib/capsule/scratch";  // per-sandbox upper/work/mount points
  std::uint32_t host_id_base = 100000;                // sandbox id 0 maps to this host id
  std::uint32_t host_id_count = 65536;
  CgroupConfig cgroup;
};

enum class OutputStream { kStdout, kStderr };

// Optional per-run hooks for callers that stream output or cancel (the daemon).
struct RunHooks {
  std::function<void(OutputStream, std::string_view)> on_output;  // called from the run()'s thread
  const std::atomic<bool>* cancel = nullptr;                      // set to true: TERM, grace, KILL
};

class Launcher {
 public:
  explicit Launcher(LauncherOptions options);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Never throws for problems of the spec or the host: those come back as setup_failed / internal_error.
  Result run(const SandboxSpec& spec, const RunHooks& hooks = {});

  int cgroup_version() const;
  const LauncherOptions& options() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace capsule::sandbox

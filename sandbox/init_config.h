// InitConfig: what capsule-init needs to finish the sandbox from the inside, sent by the launcher as
// the first channel message, followed by one descriptor per entry of `attached` (detached mounts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sandbox/cgroup.h"
#include "sandbox/spec.h"

namespace capsule::sandbox {

// A detached mount created by the launcher (idmapped and/or read-only), attached by init at `target`.
// Targets are absolute paths: layers attach under the scratch dir, binds under the new root.
struct AttachedMount {
  std::string target;
  bool is_file = false;    // bind of a single file: the target is created as an empty file
};

// A copy-on-write mount inside the new root; its lower dirs are attached layers.
struct OverlayConfig {
  std::vector<std::string> lower_dirs;
  std::string upper_dir;
  std::string work_dir;
  std::string target;  // inside new_root
};

struct InitConfig {
  std::string hostname;
  bool readonly_rootfs = false;
  std::uint64_t tmp_size_bytes = 0;
  std::string new_root;                    // overlay mount point (scratch)
  std::vector<std::string> lower_dirs;     // attached layer mount points, topmost first
  std::string upper_dir;
  std::string work_dir;
  std::vector<OverlayConfig> overlays;     // mounted after the rootfs, before the binds
  std::vector<AttachedMount> layers;       // attach before any overlay (rootfs layers, then overlays')
  std::vector<AttachedMount> binds;        // attach after the overlay, targets inside new_root
  // Bytes of raw BPF (compile_seccomp) in the message after this one, before any descriptor; 0: no filter.
  // Apart from the JSON, which would otherwise carry (and parse) a few KiB of it per box.
  std::uint64_t seccomp_program_bytes = 0;
  std::vector<std::string> protect;        // EnvironmentSpec::protect, globs inside the new root
  std::string protect_base = "/";
  bool session = false;                    // EnvironmentSpec::session
  std::vector<CgroupViewMount> cgroup_views;  // mounted read-only under /sys/fs/cgroup (cgroup_view.h)
  bool own_network = true;      // a new network namespace, whose loopback init brings up (else a joined one)
  bool join_init_leaf = false;  // v2: a cgroup.procs descriptor follows the binds' (Cgroup::init_leaf_procs_file)
};

std::string encode_init_config(const InitConfig& config);
InitConfig decode_init_config(const std::string& text);  // throws SandboxError (step "init-config")

// Events capsule-init sends back, one JSON object per message: {"event": NAME, ...}. All but "ready" and a
// setup "error" name the exec they are about ({"id"}).
namespace init_event {
inline constexpr const char* kReady = "ready";            // {"t_ns"}: mounts done, requests are served
inline constexpr const char* kExec = "exec";              // {"id", "t_ns", "seccomp_t_ns"}: execve succeeded
inline constexpr const char* kError = "error";            // {["id"], "step","path","errno","detail"}
inline constexpr const char* kExited = "exited";          // {"id", "code"} or {"id", "signal"}
}  // namespace init_event

}  // namespace capsule::sandbox

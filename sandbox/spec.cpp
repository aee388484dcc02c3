// validate_*: the one place the sandbox value types are checked before anything is created for them,
// and the split of a one-shot SandboxSpec into its environment and its process.
// Every message names the field at fault.
#include "sandbox/spec.h"

#include <set>

#include "sandbox/error.h"
#include "sandbox/quota.h"

namespace capsule::sandbox {
namespace {

constexpr std::size_t kMaxOverlayLayers = 500;  // overlayfs's limit on lower layers (OVL_MAX_STACK)

bool is_clean_absolute(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  for (std::size_t start = 1; start <= path.size();) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == ".." || part == ".") return false;
    start = end + 1;
  }
  return path.find('\0') == std::string::npos;
}

void require(bool ok, const std::string& field, const std::string& what) {
  if (!ok) throw_error("spec", field, what);
}

}  // namespace

EnvironmentSpec environment_of(const SandboxSpec& spec) {
  EnvironmentSpec env;
  env.rootfs_layers = spec.rootfs_layers;
  env.upper_dir = spec.upper_dir;
  env.overlays = spec.overlays;
  env.mounts = spec.mounts;
  env.readonly_rootfs = spec.readonly_rootfs;
  env.network = spec.network;
  env.loopback_listeners = spec.loopback_listeners;
  env.seccomp_profile = spec.seccomp_profile;
  env.hostname = spec.hostname;
  env.limits = spec.limits;
  env.protect = spec.protect;
  env.protect_base = spec.protect_base;
  return env;
}

ProcessSpec process_of(const SandboxSpec& spec) {
  ProcessSpec process;
  process.argv = spec.argv;
  process.env = spec.env;
  process.cwd = spec.cwd;
  process.uid = spec.uid;
  process.gid = spec.gid;
  process.stdin_data = spec.stdin_data;
  process.limits = spec.limits;
  process.stdout_spill_path = spec.stdout_spill_path;
  process.stderr_spill_path = spec.stderr_spill_path;
  return process;
}

void validate_spec(const SandboxSpec& spec, std::uint32_t id_count) {
  validate_process(process_of(spec), id_count);
  validate_environment(environment_of(spec));
}

void validate_process(const ProcessSpec& spec, std::uint32_t id_count) {
  require(!spec.argv.empty() && !spec.argv[0].empty(), "argv", "must name a command");
  for (const auto& entry : spec.env) {
    require(entry.find('=') != std::string::npos && entry[0] != '=', "env", "entry '" + entry + "' is not NAME=VALUE");
  }
  require(is_clean_absolute(spec.cwd), "cwd", "must be an absolute path without . or ..");
  require(spec.uid < id_count && spec.gid < id_count, "uid", "outside the sandbox's id range");
  require(spec.limits.wall_time.count() >= 0 && spec.limits.cpu_time.count() >= 0 &&
              spec.limits.kill_grace.count() >= 0 && spec.idle_timeout.count() >= 0,
          "limits", "times must not be negative");
}

void validate_environment(const EnvironmentSpec& spec) {
  require(spec.network_namespace.empty() || is_clean_absolute(spec.network_namespace), "network_namespace",
          "must be an absolute host path");
  require(!spec.rootfs_layers.empty(), "rootfs_layers", "at least one layer is required");
  require(spec.rootfs_layers.size() <= kMaxOverlayLayers, "rootfs_layers",
          "overlayfs stacks at most " + std::to_string(kMaxOverlayLayers) + " layers");
  for (const auto& layer : spec.rootfs_layers) {
    require(is_clean_absolute(layer), "rootfs_layers", "'" + layer + "' must be an absolute host path");
  }
  for (const auto& o : spec.overlays) {
    require(!o.layers.empty(), "overlays.layers", "at least one layer is required");
    require(o.layers.size() <= kMaxOverlayLayers, "overlays.layers",
            "overlayfs stacks at most " + std::to_string(kMaxOverlayLayers) + " layers");
    for (const auto& layer : o.layers) {
      require(is_clean_absolute(layer), "overlays.layers", "'" + layer + "' must be an absolute host path");
    }
    require(is_clean_absolute(o.upper_dir), "overlays.upper_dir", "'" + o.upper_dir + "' must be an absolute host path");
    require(is_clean_absolute(o.work_dir), "overlays.work_dir", "'" + o.work_dir + "' must be an absolute host path");
    require(o.seed_dir.empty() || is_clean_absolute(o.seed_dir), "overlays.seed_dir",
            "'" + o.seed_dir + "' must be an absolute host path");
    require(is_clean_absolute(o.target) && o.target != "/", "overlays.target",
            "'" + o.target + "' must be an absolute path below /");
  }
  for (const auto& m : spec.mounts) {
    require(is_clean_absolute(m.source), "mounts.source", "'" + m.source + "' must be an absolute host path");
    require(is_clean_absolute(m.target) && m.target != "/", "mounts.target",
            "'" + m.target + "' must be an absolute path below /");
  }
  std::set<std::uint16_t> ports;
  for (const auto port : spec.loopback_listeners) {
    require(port != 0 && ports.insert(port).second, "loopback_listeners", "ports must be non-zero and distinct");
  }
  require(!spec.hostname.empty() && spec.hostname.size() <= 64, "hostname", "must be 1-64 characters");
  require(spec.limits.cpus >= 0, "limits.cpus", "must not be negative");
  require(spec.limits.tmp_size_bytes >= 4096, "limits.tmp_size_bytes", "must be at least 4096");
  require(spec.limits.memory_bytes == 0 || spec.limits.memory_bytes >= (4u << 20), "limits.memory_bytes",
          "must be 0 (unlimited) or at least 4 MiB");
  require(spec.limits.disk_bytes == 0 || (spec.limits.disk_bytes >= kMinDiskBytes && spec.limits.disk_bytes <= kMaxDiskBytes),
          "limits.disk_bytes", "must be 0 (unlimited) or 16 MiB to 1 PiB");
  require(spec.limits.disk_inodes == 0 || (spec.limits.disk_bytes != 0 && spec.limits.disk_inodes >= kMinDiskInodes &&
                                           spec.limits.disk_inodes <= kMaxDiskInodes),
          "limits.disk_inodes", "needs limits.disk_bytes and must be 64 to 2^32-1");
  require(spec.limits.disk_bytes == 0 || spec.upper_dir.empty(), "upper_dir",
          "a kept upper dir cannot be combined with limits.disk_bytes");
  require(spec.protect.size() <= 256, "protect", "at most 256 globs");
  require(is_clean_absolute(spec.protect_base), "protect_base", "must be an absolute path without . or ..");
  for (const auto& glob : spec.protect) {
    require(!glob.empty() && glob.size() <= 4096 && glob.find('\0') == std::string::npos, "protect",
            "globs must be 1-4096 characters");
    require(glob != ".." && glob.find("../") == std::string::npos && !glob.ends_with("/.."), "protect",
            "glob '" + glob + "' must not contain ..");
    std::size_t double_stars = 0;
    for (std::size_t at = glob.find("**"); at != std::string::npos; at = glob.find("**", at + 2)) ++double_stars;
    require(double_stars <= 4, "protect", "glob '" + glob + "' has more than 4 '**' (matching would explode)");
  }
}

}  // namespace capsule::sandbox

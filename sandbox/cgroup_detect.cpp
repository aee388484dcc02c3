// Picks the cgroup back end this host supports: v2 when the unified hierarchy at mount_root offers memory and
// pids, else v1 when memory and pids hierarchies are mounted under mount_root; otherwise a SandboxError.
#include "sandbox/cgroup_fs.h"
#include "sandbox/error.h"

namespace capsule::sandbox {

std::unique_ptr<CgroupManager> detect_cgroups(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs) {
  std::string why_not_v2;
  const std::string controllers_file = join_path(config.mount_root, "cgroup.controllers");
  if (fs->exists(controllers_file)) {
    const std::string offered = fs->read(controllers_file);
    const std::vector<std::string> controllers = split_words(offered);
    if (contains(controllers, "memory") && contains(controllers, "pids")) return make_cgroup_v2(config, std::move(fs));
    why_not_v2 = "cgroup v2 there lacks memory or pids (cgroup.controllers: '" +
                 offered.substr(0, offered.find('\n')) + "')";
  } else {
    why_not_v2 = "it is not a cgroup v2 mount";
  }
  const auto mounts = parse_v1_mounts(fs->read(kMountInfoPath), config.mount_root);
  if (mounts.count("memory") && mounts.count("pids")) return make_cgroup_v1(config, std::move(fs));
  throw_error("cgroup", config.mount_root,
              "no usable cgroups: " + why_not_v2 +
                  ", and no cgroup v1 memory and pids hierarchies are mounted under it");
}

std::unique_ptr<CgroupManager> detect_cgroups(const CgroupConfig& config) {
  return detect_cgroups(config, host_cgroup_fs());
}

}  // namespace capsule::sandbox

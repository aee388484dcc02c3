// JSON encoding of InitConfig for the launcher -> capsule-init channel.
// The only place these fields are mapped; both sides use it.
#include "sandbox/init_config.h"

#include <nlohmann/json.hpp>

#include "sandbox/error.h"

namespace capsule::sandbox {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AttachedMount, target, is_file)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CgroupViewMount, fstype, options, name, aliases)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(OverlayConfig, lower_dirs, upper_dir, work_dir, target)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(InitConfig, hostname, readonly_rootfs, tmp_size_bytes, new_root, lower_dirs,
                                   upper_dir, work_dir, overlays, layers, binds, seccomp_program_bytes, protect,
                                   protect_base, session, cgroup_views, own_network, join_init_leaf)

std::string encode_init_config(const InitConfig& config) { return nlohmann::json(config).dump(); }

InitConfig decode_init_config(const std::string& text) {
  try {
    return nlohmann::json::parse(text).get<InitConfig>();
  } catch (const nlohmann::json::exception& e) {
    throw_error("init-config", "", e.what());
  }
}

}  // namespace capsule::sandbox

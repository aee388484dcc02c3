// The sandbox's filesystem, built by capsule-init inside its own mount namespace: overlay rootfs,
// attached binds, /proc, minimal /dev, tmpfs /tmp, read-only /sys, masked paths, pivot_root.
#pragma once

#include <vector>

#include "sandbox/init_config.h"

namespace capsule::sandbox {

// `layer_fds` / `bind_fds` are the detached mounts matching config.layers / config.binds.
// Leaves the process in the new root with cwd "/". Throws SandboxError (step "mount", target path).
void build_filesystem(const InitConfig& config, const std::vector<int>& layer_fds, const std::vector<int>& bind_fds);

}  // namespace capsule::sandbox

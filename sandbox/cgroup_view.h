// The box's own cgroups, mounted read-only at /sys/fs/cgroup inside it, as container runtimes do: with the box's
// cgroup namespace as their root, the JVM, nproc-like tools and scripts read the box's memory and CPU limits.
#pragma once

#include <string>
#include <vector>

#include "sandbox/cgroup.h"

namespace capsule::sandbox {

// Run by capsule-init inside its user, mount and cgroup namespaces, after /sys is mounted under root and
// before pivot_root: a tmpfs at root/sys/fs/cgroup holding each view (v1) or cgroup2 itself (v2), read-only.
// Throws SandboxError (step "cgroup-view") naming the mount that failed.
void mount_cgroup_view(const std::string& root, const std::vector<CgroupViewMount>& views);

}  // namespace capsule::sandbox

// The box's own cgroups, mounted read-only at /sys/fs/cgroup inside it (see cgroup_view.h): one cgroup v1
// hierarchy per directory on a small tmpfs, with symlinks for co-mounted controllers, or cgroup2 alone.
#include "sandbox/cgroup_view.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

constexpr unsigned long kViewFlags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;

void mount_or_throw(const char* source, const std::string& target, const char* type, unsigned long flags,
                    const std::string& data) {
  if (mount(source, target.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0)
    throw_errno("cgroup-view", target, std::string("mount ") + (type ? type : "remount") + " " + data);
}

}  // namespace

void mount_cgroup_view(const std::string& root, const std::vector<CgroupViewMount>& views) {
  if (views.empty()) return;
  const std::string base = root + "/sys/fs/cgroup";
  if (views.size() == 1 && views[0].fstype == "cgroup2") {
    mount_or_throw("cgroup2", base, "cgroup2", kViewFlags, "");
    return;
  }
  mount_or_throw("cgroup", base, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=16k,nr_inodes=64");
  for (const CgroupViewMount& view : views) {
    const std::string dir = base + "/" + view.name;
    if (mkdir(dir.c_str(), 0555) != 0 && errno != EEXIST) throw_errno("cgroup-view", dir, "mkdir");
    mount_or_throw("cgroup", dir, view.fstype.c_str(), kViewFlags, view.options);
    for (const std::string& alias : view.aliases) {
      const std::string link = base + "/" + alias;
      if (symlink(view.name.c_str(), link.c_str()) != 0 && errno != EEXIST) throw_errno("cgroup-view", link, "symlink");
    }
  }
  mount_or_throw(nullptr, base, nullptr, MS_REMOUNT | kViewFlags, "mode=0755,size=16k,nr_inodes=64");
}

}  // namespace capsule::sandbox

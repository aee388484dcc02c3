// Restart recovery of the state dir: a dead daemon's boxes keep their disks mounted where their layers were bound
// (runs/, sessions/), and each mounted disk keeps a loop device and its deleted image's space until detached.
#include "daemon/state_recovery.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "sandbox/quota.h"

namespace capsule::daemon {
namespace fs = std::filesystem;
namespace {

// Removes every entry of `dir` (the dir stays); how many.
std::size_t remove_entries(const std::string& dir) {
  std::size_t removed = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code ignored;
    if (fs::remove_all(it->path(), ignored) > 0) ++removed;
  }
  return removed;
}

}  // namespace

RecoveryReport recover_state_dir(sandbox::Launcher& launcher, const std::string& state) {
  RecoveryReport report;
  // Only the daemon's own subdirectories: the state dir itself may be a mount (a disk of its own), and so may
  // images/ or store/ (an operator's choice); none of those is a box's.
  for (const char* sub : {"/scratch", "/disks", "/runs", "/sessions", "/stacks", "/netns"}) {
    report.mounts += sandbox::detach_mounts_below(state + sub);
  }
  // Their disks are unmounted now (lazily, once the killed boxes' mount namespaces are gone): a device with
  // autoclear goes by itself then, and this makes sure every other one does too.
  report.loop_devices = sandbox::release_loop_devices_below(state);
  report.sandboxes = launcher.remove_leftovers();
  report.run_dirs = remove_entries(state + "/runs");
  report.session_dirs = remove_entries(state + "/sessions");
  std::error_code ignored;
  fs::remove_all(state + "/store/tmp", ignored);  // an image import's staging area
  // Earlier capsuleds kept their derived images (host skeleton, test-order plugin) here; they live on the
  // scratch tmpfs now. Only those entries go: the directory may be an operator's mount.
  for (auto it = fs::directory_iterator(state + "/images", ignored); !ignored && it != fs::directory_iterator();
       it.increment(ignored)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("host-root-") || name == "test-order") fs::remove_all(it->path(), ignored);
  }
  fs::remove(state + "/images", ignored);  // when empty and not a mount point
  if (report.sandboxes + report.mounts + report.loop_devices + report.session_dirs + report.run_dirs > 0) {
    spdlog::warn("removed what a previous capsuled left: {} sandbox(es), {} mount(s), {} loop device(s) told to "
                 "detach, {} session dir(s), {} run dir(s)",
                 report.sandboxes, report.mounts, report.loop_devices, report.session_dirs, report.run_dirs);
  }
  return report;
}

}  // namespace capsule::daemon

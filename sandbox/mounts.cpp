// Filesystem set-up inside the sandbox's mount namespace (runs in capsule-init, as namespace root).
// Order: private propagation, layers, overlay, binds, /proc, /dev, /tmp, /sys (+ the cgroup view), masks, pivot_root.
#include "sandbox/mounts.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sandbox/cgroup_view.h"
#include "sandbox/error.h"
#include "sandbox/protect.h"

namespace capsule::sandbox {
namespace {

// Paths the OCI runtime masks or makes read-only in every container.
constexpr const char* kMaskedPaths[] = {
    "/proc/acpi",        "/proc/asound",      "/proc/interrupts",  "/proc/kcore",
    "/proc/keys",        "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
    "/proc/sched_debug", "/proc/scsi",        "/proc/sysrq-trigger", "/sys/firmware",
    "/sys/devices/virtual/powercap", "/sys/kernel/debug", "/sys/kernel/security",
};
constexpr const char* kReadOnlyPaths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"};
constexpr const char* kDeviceNodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

void do_mount(const char* source, const std::string& target, const char* type, unsigned long flags,
              const std::string& data = {}) {
  if (mount(source, target.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0) {
    throw_errno("mount", target, std::string(type ? type : "bind") + (data.empty() ? "" : " " + data));
  }
}

void make_dir(const std::string& path, mode_t mode = 0755) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) throw_errno("mount", path, "mkdir");
}

void make_dirs(const std::string& path) {
  for (std::size_t pos = 1; pos != std::string::npos;) {
    pos = path.find('/', pos + 1);
    make_dir(path.substr(0, pos));
  }
}

void make_file(const std::string& path) {
  int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0 && errno != EEXIST && errno != EISDIR) throw_errno("mount", path, "create bind target");
  if (fd >= 0) close(fd);
}

void attach(int mount_fd, const AttachedMount& where) {
  auto slash = where.target.rfind('/');
  if (slash > 0) make_dirs(where.target.substr(0, slash));
  if (where.is_file) {
    make_file(where.target);
  } else {
    make_dir(where.target);
  }
  if (syscall(SYS_move_mount, mount_fd, "", AT_FDCWD, where.target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    throw_errno("mount", where.target, "move_mount of a detached mount");
  }
}

// The directory all `dirs` are direct children of, or "" when they do not share one.
std::string common_parent(const std::vector<std::string>& dirs) {
  std::string parent;
  for (const auto& dir : dirs) {
    const std::size_t slash = dir.rfind('/');
    if (slash == std::string::npos || slash == 0) return {};
    if (parent.empty()) parent = dir.substr(0, slash);
    if (dir.compare(0, slash, parent) != 0 || slash != parent.size()) return {};
  }
  return parent;
}

void mount_overlay(const std::vector<std::string>& lower_dirs, const std::string& upper, const std::string& work,
                   const std::string& target) {
  // mount(2) takes at most a page of options. Lower dirs named relative to their common parent (the cwd
  // for this one call) keep a deep stack well inside it: "0:1:...:127" instead of 128 absolute paths.
  const std::string parent = common_parent(lower_dirs);
  if (!parent.empty() && chdir(parent.c_str()) != 0) throw_errno("mount", parent, "chdir to the lower dirs");
  std::string lower;
  for (const auto& dir : lower_dirs) {
    lower += (lower.empty() ? "" : ":") + (parent.empty() ? dir : dir.substr(parent.size() + 1));
  }
  // Mounted inside the sandbox's user namespace, where overlayfs ignores trusted.overlay.* xattrs: userxattr
  // makes it honour the user.overlay.opaque markers image layers carry (and write its own as user.*).
  std::string options = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",userxattr";
  do_mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, options);
  if (!parent.empty() && chdir("/") != 0) throw_errno("mount", "/", "chdir");
}

void mount_dev(const std::string& root) {
  const std::string dev = root + "/dev";
  make_dir(dev);
  do_mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
  for (const char* node : kDeviceNodes) {
    const std::string target = dev + "/" + node;
    make_file(target);
    do_mount(("/dev/" + std::string(node)).c_str(), target, nullptr, MS_BIND);
  }
  make_dir(dev + "/pts");
  do_mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  make_dir(dev + "/shm", 01777);
  const struct { const char* target; const char* link; } links[] = {
      {"ptmx", "pts/ptmx"}, {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"},
      {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}};
  for (const auto& l : links) {
    const std::string target = dev + "/" + l.target;
    if (symlink(l.link, target.c_str()) != 0) throw_errno("mount", target, "symlink");
  }
  do_mount("tmpfs", dev, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC);
}

void mask_path(const std::string& root, const char* path) {
  const std::string target = root + path;
  struct stat st;
  if (lstat(target.c_str(), &st) != 0) return;  // absent on this kernel: nothing to mask
  if (S_ISDIR(st.st_mode)) {
    do_mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0");
  } else {
    do_mount("/dev/null", target, nullptr, MS_BIND);
  }
}

void make_read_only(const std::string& target) {
  struct stat st;
  if (lstat(target.c_str(), &st) != 0) return;
  do_mount(target.c_str(), target, nullptr, MS_BIND | MS_REC);
  do_mount(nullptr, target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
}

void pivot_into(const std::string& root) {
  if (chdir(root.c_str()) != 0) throw_errno("pivot_root", root, "chdir");
  if (syscall(SYS_pivot_root, ".", ".") != 0) throw_errno("pivot_root", root, "pivot_root");
  if (umount2(".", MNT_DETACH) != 0) throw_errno("pivot_root", root, "detach old root");
  if (chdir("/") != 0) throw_errno("pivot_root", "/", "chdir");
}

}  // namespace

void build_filesystem(const InitConfig& config, const std::vector<int>& layer_fds, const std::vector<int>& bind_fds) {
  do_mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE);

  for (std::size_t i = 0; i < config.layers.size(); ++i) attach(layer_fds[i], config.layers[i]);
  mount_overlay(config.lower_dirs, config.upper_dir, config.work_dir, config.new_root);
  const std::string& root = config.new_root;
  for (const auto& overlay : config.overlays) {
    make_dirs(overlay.target);
    mount_overlay(overlay.lower_dirs, overlay.upper_dir, overlay.work_dir, overlay.target);
  }

  for (std::size_t i = 0; i < config.binds.size(); ++i) attach(bind_fds[i], config.binds[i]);

  make_dir(root + "/proc");
  do_mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  mount_dev(root);
  make_dir(root + "/tmp", 01777);
  do_mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
           "mode=1777,size=" + std::to_string(config.tmp_size_bytes));
  do_mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
           "mode=1777,size=" + std::to_string(config.tmp_size_bytes));
  make_dir(root + "/sys");
  // sysfs needs CAP_SYS_ADMIN over the network namespace, which a joined one's owner (the host) keeps: such a
  // box gets a read-only /sys holding only its cgroup view.
  constexpr const char* kSysTmpfs = "mode=0755,size=16k,nr_inodes=16";
  if (config.own_network) {
    do_mount("sysfs", root + "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
  } else {
    do_mount("tmpfs", root + "/sys", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, kSysTmpfs);
    make_dirs(root + "/sys/fs/cgroup");
  }
  mount_cgroup_view(root, config.cgroup_views);
  if (!config.own_network) {
    do_mount(nullptr, root + "/sys", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, kSysTmpfs);
  }

  for (const char* path : kMaskedPaths) mask_path(root, path);
  for (const char* path : kReadOnlyPaths) make_read_only(root + path);

  protect_paths(root, config.protect_base, config.protect);
  if (config.readonly_rootfs) {
    do_mount(nullptr, root, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV);
  }
  pivot_into(root);
}

}  // namespace capsule::sandbox

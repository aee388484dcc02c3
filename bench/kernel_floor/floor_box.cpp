// One capsule-shaped box from raw syscalls (see floor_box.h). The steps and flags follow sandbox/ (mounts.cpp,
// quota.cpp, cgroup_v1.cpp, caps.cpp, command.cpp) so the kernel does the same work; nothing else is done.
#include "kernel_floor/floor_box.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include <grp.h>

#include "base/file_util.h"
#include "base/unique_fd.h"
#include "sandbox/quota.h"

namespace capsule::bench::kernel_floor {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& step) {
  throw std::runtime_error("floor box: " + step + ": " + std::strerror(errno));
}

void write_text(const std::string& path, const std::string& text) {
  base::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) fail("open " + path);
  base::write_all(fd.get(), text.data(), text.size(), "floor box", path);
}

// Reads a cgroup's usage file as the launcher does at a run's end (the value itself is not needed here).
void read_usage(const std::string& path) {
  base::UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) fail("open " + path);
  base::read_fd(fd.get(), 4096, "floor box", path);
}

constexpr std::uint64_t kInodes = 1ull << 20;  // capsule's default limits.disk_inodes

sandbox::DiskLimits disk_limits(std::uint64_t mib) { return {mib << 20, kInodes}; }

// The disk as sandbox/quota.cpp makes it: a sparse image on a loop device that detaches itself, the template's
// data (with the upper and work dirs on it) written through the device, ext4 mounted.
void mount_disk(int template_fd, const std::string& image, const std::string& target, std::uint64_t mib) {
  base::UniqueFd out(open(image.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) fail("create " + image);
  if (ftruncate(out.get(), static_cast<off_t>(sandbox::disk_image_bytes(disk_limits(mib)))) != 0) fail("ftruncate");
  base::UniqueFd loop;
  const std::string device = sandbox::attach_disk_image(template_fd, out.get(), image, loop);
  unlink(image.c_str());
  if (mkdir(target.c_str(), 0700) != 0) fail("mkdir " + target);
  if (mount(device.c_str(), target.c_str(), "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
            "noinit_itable,nobarrier,errors=remount-ro") != 0) {
    fail("mount " + device);
  }
}

// As sandbox/quota.cpp's make_dir: one the disk's template made is given the current time.
void make_owned_dir(const std::string& path, std::uint32_t owner) {
  if (mkdir(path.c_str(), 0755) != 0 && (errno != EEXIST || utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0)) {
    fail("mkdir " + path);
  }
  if (chown(path.c_str(), owner, owner) != 0) fail("chown " + path);
}

int detached_mount(const std::string& path, int userns, bool read_only, bool recursive) {
  const unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  const int tree = static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, path.c_str(), flags));
  if (tree < 0) fail("open_tree " + path);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0);
  attr.userns_fd = static_cast<std::uint64_t>(userns);
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr, sizeof attr) != 0) {
    fail("mount_setattr " + path);
  }
  return tree;
}

// --- the box's side: everything below runs in the clone, which reports failure by its exit status ---

void box_mount(const char* source, const std::string& target, const char* type, unsigned long flags,
               const char* data = nullptr) {
  if (mount(source, target.c_str(), type, flags, data) != 0) _exit(10);
}

void box_dir(const std::string& path, mode_t mode = 0755) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) _exit(11);
}

void box_file(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) _exit(12);
  close(fd);
}

void build_root(const FloorSetup& setup, const std::string& dir, const std::string& upper, const std::string& work,
                int lower_fd, int usr_fd) {
  const std::string root = dir + "/root";
  box_mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE);
  if (syscall(SYS_move_mount, lower_fd, "", AT_FDCWD, (dir + "/lower").c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) _exit(13);
  const std::string options = "lowerdir=" + dir + "/lower,upperdir=" + upper + ",workdir=" + work + ",userxattr";
  box_mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV, options.c_str());
  box_dir(root + "/usr");
  if (syscall(SYS_move_mount, usr_fd, "", AT_FDCWD, (root + "/usr").c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) _exit(14);
  box_dir(root + "/proc");
  box_mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC);
  const std::string dev = root + "/dev";
  box_dir(dev);
  box_mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    box_file(dev + "/" + node);
    box_mount(("/dev/" + std::string(node)).c_str(), dev + "/" + node, nullptr, MS_BIND);
  }
  box_dir(dev + "/pts");
  box_mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620");
  box_dir(dev + "/shm", 01777);
  for (const auto& [name, target] : {std::pair{"ptmx", "pts/ptmx"}, {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"},
                                     {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"}}) {
    if (symlink(target, (dev + "/" + name).c_str()) != 0) _exit(15);
  }
  box_mount("tmpfs", dev, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC);
  box_dir(root + "/tmp", 01777);
  box_mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=268435456");
  box_mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=268435456");
  box_dir(root + "/sys");
  box_mount("sysfs", root + "/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
  const std::string cgroup = root + "/sys/fs/cgroup";
  box_mount("cgroup", cgroup, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=16k,nr_inodes=64");
  for (const std::string& name : setup.view_hierarchies) {
    box_dir(cgroup + "/" + name);
    box_mount("cgroup", cgroup + "/" + name, "cgroup", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, name.c_str());
  }
  box_mount(nullptr, cgroup, nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=16k,nr_inodes=64");
  for (const char* path : {"/proc/acpi", "/sys/firmware", "/sys/kernel/debug", "/sys/kernel/security"}) {
    struct stat st;
    if (lstat((root + path).c_str(), &st) == 0) box_mount("tmpfs", root + path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0");
  }
  for (const char* path : {"/proc/interrupts", "/proc/keys", "/proc/timer_list"}) {
    struct stat st;
    if (lstat((root + path).c_str(), &st) == 0) box_mount("/dev/null", root + path, nullptr, MS_BIND);
  }
  for (const char* path : {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"}) {
    struct stat st;
    if (lstat((root + path).c_str(), &st) != 0) continue;
    box_mount((root + path).c_str(), root + path, nullptr, MS_BIND | MS_REC);
    box_mount(nullptr, root + path, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
  }
  if (chdir(root.c_str()) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
    _exit(16);
  }
}

void loopback_up() {
  const int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) _exit(17);
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(sock, SIOCGIFFLAGS, &request) != 0) _exit(17);
  request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
  if (ioctl(sock, SIOCSIFFLAGS, &request) != 0) _exit(17);
  close(sock);
}

// The command: what sandbox/command.cpp does between init's fork and execve.
[[noreturn]] void command(const std::vector<std::uint8_t>& program) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setsid();
  const rlimit core{0, 0};
  const rlimit nofile{1024, 1024};
  const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  const rlimit stack{8ull << 20, 8ull << 20};
  if (setrlimit(RLIMIT_CORE, &core) != 0 || setrlimit(RLIMIT_NOFILE, &nofile) != 0 ||
      setrlimit(RLIMIT_FSIZE, &unlimited) != 0 || setrlimit(RLIMIT_STACK, &stack) != 0) {
    _exit(20);
  }
  for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) _exit(21);
  }
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) _exit(21);
  if (setgroups(0, nullptr) != 0 || setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0) _exit(22);
  cap_t empty = cap_init();
  if (empty == nullptr || cap_set_proc(empty) != 0) _exit(23);
  cap_free(empty);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(24);
  if (chdir("/") != 0) _exit(25);
  if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) _exit(26);
  sock_fprog filter{};
  filter.len = static_cast<unsigned short>(program.size() / sizeof(sock_filter));
  filter.filter = reinterpret_cast<sock_filter*>(const_cast<std::uint8_t*>(program.data()));
  if (!program.empty() && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter, 0, 0) != 0) _exit(27);
  char* const argv[] = {const_cast<char*>("/usr/bin/true"), nullptr};
  char* const envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
  execve(argv[0], argv, envp);
  _exit(28);
}

// PID 1 of the box: waits for the parent's maps and cgroup, builds the root, forks the command, reaps it.
[[noreturn]] void box_main(const FloorSetup& setup, const std::string& dir, const std::string& upper,
                           const std::string& work, int lower_fd, int usr_fd, int gate) {
  char go = 0;
  if (read(gate, &go, 1) != 1) _exit(30);
  close(gate);
  if (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0) _exit(31);
  build_root(setup, dir, upper, work, lower_fd, usr_fd);
  close(lower_fd);
  close(usr_fd);
  if (sethostname("capsule", 7) != 0) _exit(32);
  loopback_up();
  const pid_t child = fork();
  if (child < 0) _exit(33);
  if (child == 0) command(setup.seccomp);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) _exit(34);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

void remove_cgroup_dir(const std::string& dir) {
  for (int attempt = 0; rmdir(dir.c_str()) != 0; ++attempt) {
    if (errno != EBUSY || attempt == 1000) fail("rmdir " + dir);
    usleep(100);  // the exited box leaves the group a moment after it is reaped
  }
}

}  // namespace

int make_idmap_userns(std::uint32_t host_root) {
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) fail("pipe2");
  const pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    close(gate[1]);
    if (unshare(CLONE_NEWUSER) != 0) _exit(1);
    char byte;
    (void)!read(gate[0], &byte, 1);
    _exit(0);
  }
  close(gate[0]);
  // Wait for the unshare: the namespace link changes from ours.
  const std::string ours = fs::read_symlink("/proc/self/ns/user").string();
  const std::string link = "/proc/" + std::to_string(pid) + "/ns/user";
  for (int i = 0; i < 10000 && fs::read_symlink(link).string() == ours; ++i) usleep(100);
  const std::string map = "0 " + std::to_string(host_root) + " 1\n";
  write_text("/proc/" + std::to_string(pid) + "/uid_map", map);
  write_text("/proc/" + std::to_string(pid) + "/gid_map", map);
  const int fd = open(link.c_str(), O_RDONLY | O_CLOEXEC);
  close(gate[1]);
  waitpid(pid, nullptr, 0);
  if (fd < 0) fail("open " + link);
  return fd;
}

base::UniqueFd disk_template(const FloorSetup& setup, std::uint64_t mib) {
  return sandbox::disk_template(setup.disk_dir, disk_limits(mib), setup.host_root, {"upper", "work"});
}

void run_floor_box(const FloorSetup& setup, std::uint64_t disk_mib, int number) {
  const std::string name = "box-" + std::to_string(number);
  const std::string dir = setup.scratch + "/" + name;
  if (mkdir(dir.c_str(), 0710) != 0 || chown(dir.c_str(), 0, setup.host_root) != 0) fail("mkdir " + dir);  // as scratch.cpp
  if (mkdir((dir + "/root").c_str(), 0755) != 0 || mkdir((dir + "/lower").c_str(), 0755) != 0) fail("mkdir root");
  std::string upper = dir + "/upper";
  std::string work = dir + "/work";
  const std::string disk = dir + "/disk";
  if (disk_mib > 0) {
    mount_disk(disk_template(setup, disk_mib).get(), setup.disk_dir + "/" + name + ".img", disk, disk_mib);
    upper = disk + "/upper";
    work = disk + "/work";
  }
  make_owned_dir(upper, setup.host_root);
  make_owned_dir(work, setup.host_root);

  // The box's cgroup in each hierarchy, limited, and the exec's leaf in memory, cpuacct and freezer (as
  // cgroup_v1.cpp: in pids and cpu the exec stays in the box's group).
  struct Group {
    std::string controller;
    std::string box;
    std::string exec;  // the exec's leaf, or the box's group
  };
  std::vector<Group> groups;
  for (const std::string& parent : setup.cgroup_parents) {
    Group& group = groups.emplace_back();
    group.controller = fs::path(parent).parent_path().filename().string();
    group.box = parent + "/" + name;
    if (mkdir(group.box.c_str(), 0755) != 0) fail("mkdir " + group.box);
    if (group.controller == "memory") write_text(group.box + "/memory.limit_in_bytes", "268435456");
    if (group.controller == "pids") write_text(group.box + "/pids.max", "64");
    const bool leaf = group.controller == "memory" || group.controller == "cpuacct" || group.controller == "freezer";
    group.exec = leaf ? group.box + "/exec" : group.box;
    if (leaf && mkdir(group.exec.c_str(), 0755) != 0) fail("mkdir exec leaf");
  }

  const int lower_fd = detached_mount(setup.lower, setup.idmap_userns, true, false);
  const int usr_fd = detached_mount("/usr", setup.idmap_userns, true, true);
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) fail("pipe2");
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET |
               CLONE_NEWCGROUP | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  const long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) fail("clone3");
  if (pid == 0) {
    close(gate[1]);
    box_main(setup, dir, upper, work, lower_fd, usr_fd, gate[0]);
  }
  close(gate[0]);
  close(lower_fd);
  close(usr_fd);
  const std::string map = "0 " + std::to_string(setup.host_root) + " 65536\n";
  write_text("/proc/" + std::to_string(pid) + "/uid_map", map);
  write_text("/proc/" + std::to_string(pid) + "/gid_map", map);
  for (const Group& group : groups) write_text(group.exec + "/cgroup.procs", std::to_string(pid));
  if (write(gate[1], "g", 1) != 1) fail("release the box");
  close(gate[1]);
  siginfo_t info{};
  if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED) != 0) fail("waitid");
  close(pidfd);
  if (info.si_code != CLD_EXITED || info.si_status != 0) {
    throw std::runtime_error("floor box: exited with status " + std::to_string(info.si_status) + " (code " +
                             std::to_string(info.si_code) + ")");
  }

  // What capsule reads at the end: CPU and peak memory.
  for (const Group& group : groups) {  // from the exec's leaf, as capsule reads them
    if (group.controller == "memory") read_usage(group.exec + "/memory.max_usage_in_bytes");
    if (group.controller == "cpuacct") {
      read_usage(group.exec + "/cpuacct.usage_user");
      read_usage(group.exec + "/cpuacct.usage_sys");
    }
  }
  for (const Group& group : groups) {
    if (group.exec != group.box) remove_cgroup_dir(group.exec);
    remove_cgroup_dir(group.box);
  }
  if (disk_mib > 0 && umount2(disk.c_str(), MNT_DETACH) != 0) fail("umount " + disk);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) throw std::runtime_error("floor box: remove " + dir + ": " + ec.message());
}

void run_disk_only(const FloorSetup& setup, std::uint64_t disk_mib, int number) {
  const std::string name = "disk-" + std::to_string(number);
  const std::string disk = setup.scratch + "/" + name;
  mount_disk(disk_template(setup, disk_mib).get(), setup.disk_dir + "/" + name + ".img", disk, disk_mib);
  make_owned_dir(disk + "/upper", setup.host_root);
  make_owned_dir(disk + "/work", setup.host_root);
  if (mkdir((disk + "/work/work").c_str(), 0700) != 0) fail("mkdir " + disk + "/work/work");  // as overlayfs does
  if (umount2(disk.c_str(), MNT_DETACH) != 0) fail("umount " + disk);
  if (rmdir(disk.c_str()) != 0) fail("rmdir " + disk);
}

}  // namespace capsule::bench::kernel_floor

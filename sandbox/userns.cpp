// uid/gid maps and idmapped detached mounts (open_tree + mount_setattr), done by the launcher
// between clone and letting the child continue.
#include "sandbox/userns.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sandbox/error.h"
#include "base/unique_fd.h"

namespace capsule::sandbox {
namespace {

void write_file(const std::string& path, const std::string& content) {
  base::UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) throw_errno("userns", path, "open");
  if (write(fd.get(), content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    throw_errno("userns", path, "write " + content);
  }
}

}  // namespace

void write_id_maps(pid_t pid, const IdRange& range) {
  const std::string map = "0 " + std::to_string(range.host_base) + " " + std::to_string(range.count) + "\n";
  const std::string proc = "/proc/" + std::to_string(pid);
  write_file(proc + "/uid_map", map);
  write_file(proc + "/gid_map", map);
}

int open_user_namespace(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/ns/user";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("userns", path, "open");
  return fd;
}

int make_owner_mapping_namespace(std::uint32_t on_disk_uid, std::uint32_t on_disk_gid, std::uint32_t sandbox_root) {
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) throw_errno("userns", "", "pipe2");
  base::UniqueFd gate_read(gate[0]);
  base::UniqueFd gate_write(gate[1]);
  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_NEWUSER | CLONE_PIDFD | CLONE_CLEAR_SIGHAND;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) throw_errno("userns", "", "clone3(CLONE_NEWUSER) for an id mapping");
  if (pid == 0) {
    close(gate[1]);
    char byte;
    (void)!read(gate[0], &byte, 1);  // holds the namespace open until the parent has its fd
    _exit(0);
  }
  base::UniqueFd child(pidfd);
  int result = -1;
  try {
    const std::string proc = "/proc/" + std::to_string(pid);
    write_file(proc + "/uid_map", std::to_string(on_disk_uid) + " " + std::to_string(sandbox_root) + " 1\n");
    write_file(proc + "/gid_map", std::to_string(on_disk_gid) + " " + std::to_string(sandbox_root) + " 1\n");
    result = open_user_namespace(static_cast<pid_t>(pid));
  } catch (...) {
    gate_write.reset();
    siginfo_t info;
    waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(child.get()), &info, WEXITED | __WALL);
    throw;
  }
  gate_write.reset();
  siginfo_t info;
  waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(child.get()), &info, WEXITED | __WALL);
  return result;
}

int make_detached_mount(const std::string& path, int userns_fd, bool idmap, bool read_only, bool recursive) {
  unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  base::UniqueFd tree(static_cast<int>(syscall(SYS_open_tree, AT_FDCWD, path.c_str(), flags)));
  if (!tree) throw_errno("idmap", path, "open_tree");
  mount_attr attr{};
  if (idmap) {
    attr.attr_set |= MOUNT_ATTR_IDMAP;
    attr.userns_fd = static_cast<std::uint64_t>(userns_fd);
  }
  if (read_only) attr.attr_set |= MOUNT_ATTR_RDONLY;
  attr.attr_set |= MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  unsigned set_flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
  if (syscall(SYS_mount_setattr, tree.get(), "", set_flags, &attr, sizeof attr) != 0) {
    throw_errno("idmap", path, idmap ? "mount_setattr(MOUNT_ATTR_IDMAP)" : "mount_setattr");
  }
  return tree.release();
}

}  // namespace capsule::sandbox

/* Hostile: the fd-based mount API (fsopen/fsmount, open_tree clone, move_mount, mount_setattr, fspick).
 * Expected "new_mount_api: fsopen=EPERM open_tree=EPERM move_mount=EPERM mount_setattr=EPERM fspick=EPERM". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/syscall.h>

#include "report.h"

int main(void) {
  long fs = syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
  int fsopen_err = tc_err(fs);
  long tree = syscall(SYS_open_tree, AT_FDCWD, "/usr", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
  int tree_err = tc_err(tree);
  int move_err = tc_err(syscall(SYS_move_mount, AT_FDCWD, "/usr", AT_FDCWD, "/tmp", 0));
  struct mount_attr attr = {.attr_clr = MOUNT_ATTR_RDONLY};
  int setattr_err = tc_err(syscall(SYS_mount_setattr, AT_FDCWD, "/usr", 0, &attr, sizeof attr));
  int pick_err = tc_err(syscall(SYS_fspick, AT_FDCWD, "/usr", FSPICK_CLOEXEC));
  tc_begin("new_mount_api");
  tc_add_errno("fsopen", fsopen_err);
  tc_add_errno("open_tree", tree_err);
  tc_add_errno("move_mount", move_err);
  tc_add_errno("mount_setattr", setattr_err);
  tc_add_errno("fspick", pick_err);
  int escaped = fsopen_err == 0 || tree_err == 0 || move_err == 0 || setattr_err == 0 || pick_err == 0;
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: mounts a second procfs (it would be unmasked, with a writable /proc/sys).
 * Expected "mount_proc: errno=EPERM": mount(2) is not in the seccomp allowlist and no CAP_SYS_ADMIN is held. */
#define _GNU_SOURCE
#include <sys/mount.h>
#include <sys/stat.h>

#include "report.h"

int main(void) {
  mkdir("/tmp/proc2", 0755);
  long rc = mount("proc", "/tmp/proc2", "proc", 0, NULL);
  return tc_single("mount_proc", rc, errno);
}

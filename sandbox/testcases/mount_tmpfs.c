/* Hostile: mounts a tmpfs over /etc to replace the sandbox's configuration.
 * Expected "mount_tmpfs: errno=EPERM" (seccomp denies mount; no CAP_SYS_ADMIN either). */
#define _GNU_SOURCE
#include <sys/mount.h>

#include "report.h"

int main(void) {
  long rc = mount("tmpfs", "/etc", "tmpfs", 0, "size=1m");
  return tc_single("mount_tmpfs", rc, errno);
}

/* Hostile: plants a set-uid/set-gid file and file capabilities in a writable bind (argv[1]); the test checks the
 * host copy. Prints "setuid_plant: create=ok chmod=ok|E... fcaps=E..." and exits 0: the host side judges. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/capability.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2) return tc_unsure("setuid_plant", "usage", EINVAL);
  char path[4096];
  snprintf(path, sizeof path, "%s/planted", argv[1]);
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0755);
  if (fd < 0) return tc_unsure("setuid_plant", "create", errno);
  static const char script[] = "#!/bin/sh\nid\n";
  if (write(fd, script, sizeof script - 1) < 0) return tc_unsure("setuid_plant", "write", errno);
  int chmod_err = tc_err(fchmod(fd, 06755));
  /* security.capability v2 granting every capability (file caps survive nosuid on the host side). */
  struct vfs_cap_data caps;
  memset(&caps, 0, sizeof caps);
  caps.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
  caps.data[0].permitted = caps.data[1].permitted = 0xffffffffu;
  int fcaps_err = tc_err(fsetxattr(fd, "security.capability", &caps, XATTR_CAPS_SZ_2, 0));
  close(fd);
  tc_begin("setuid_plant");
  tc_add("create", "ok");
  tc_add_errno("chmod", chmod_err);
  tc_add_errno("fcaps", fcaps_err);
  return tc_end(fcaps_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

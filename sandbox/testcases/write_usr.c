/* Hostile: writes under /usr (host /usr is the lowest rootfs layer). argv[1] "ro" (read-only rootfs: expect
 * "write_usr: create=EROFS open=EROFS") or "rw" (writes land in the sandbox's upper: "create=ok open=ok"). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "ro") != 0 && strcmp(argv[1], "rw") != 0)) {
    return tc_unsure("write_usr", "usage", EINVAL);
  }
  int writable_rootfs = strcmp(argv[1], "rw") == 0;
  int fd = open("/usr/hostile-probe", O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  int create = tc_err(fd);
  if (fd >= 0) {
    static const char text[] = "written inside a capsule sandbox\n";
    if (write(fd, text, sizeof text - 1) < 0) create = errno;
    close(fd);
  }
  /* An existing lower-layer file: on a writable overlay this copies it up; the host copy must not change. */
  fd = open("/usr/bin/env", O_WRONLY | O_CLOEXEC);
  int open_err = tc_err(fd);
  if (fd >= 0) close(fd);
  tc_begin("write_usr");
  tc_add_errno("create", create);
  tc_add_errno("open", open_err);
  if (writable_rootfs) return tc_end(create == 0 && open_err == 0 ? TC_BLOCKED : TC_UNSURE);
  return tc_end(create == 0 || open_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: writes into a read-only bind of a host directory (argv[1], default /opt/testcases): create, open an
 * existing file (argv[2]) for writing, chmod, unlink. Expected every key =EROFS. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "/opt/testcases";
  const char *existing = argc > 2 ? argv[2] : "/opt/testcases/mount_proc";
  char path[4096];
  snprintf(path, sizeof path, "%s/hostile-created", dir);
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  int create = tc_err(fd);
  fd = open(existing, O_WRONLY | O_CLOEXEC); /* never written to: opening is the test */
  int open_err = tc_err(fd);
  struct stat st;
  if (stat(existing, &st) != 0) return tc_unsure("write_ro_bind", "stat", errno);
  int chmod_err = tc_err(chmod(existing, st.st_mode & 07777)); /* same mode: a no-op if it ever worked */
  snprintf(path, sizeof path, "%s/hostile-no-such-file", dir);
  int unlink_err = tc_err(unlink(path));
  tc_begin("write_ro_bind");
  tc_add_errno("create", create);
  tc_add_errno("open", open_err);
  tc_add_errno("chmod", chmod_err);
  tc_add_errno("unlink", unlink_err);
  int escaped = create == 0 || open_err == 0 || chmod_err == 0 || unlink_err == 0 || unlink_err == ENOENT;
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

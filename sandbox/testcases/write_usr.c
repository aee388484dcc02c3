/* Hostile: writes under /usr, the host's own /usr bound read-only into the sandbox: creates a file and opens
 * an existing one for writing (never writes it). Expected "write_usr: create=EROFS open=EROFS". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  int fd = open("/usr/hostile-probe", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  int create = tc_err(fd);
  if (fd >= 0) close(fd);
  fd = open("/usr/bin/env", O_WRONLY | O_CLOEXEC);
  int open_err = tc_err(fd);
  if (fd >= 0) close(fd);
  tc_begin("write_usr");
  tc_add_errno("create", create);
  tc_add_errno("open", open_err);
  return tc_end(create == 0 || open_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

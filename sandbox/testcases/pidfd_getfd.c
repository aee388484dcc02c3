/* Hostile: steals init's fd 3 (the control channel to the launcher on the host) with pidfd_getfd.
 * Expected "pidfd_getfd: pidfd_open=ok getfd=EPERM" (a ptrace-attach access check on a non-dumpable init). */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  long pidfd = syscall(SYS_pidfd_open, 1, 0);
  tc_begin("pidfd_getfd");
  tc_add_errno("pidfd_open", tc_err(pidfd));
  if (pidfd < 0) return tc_end(TC_BLOCKED);
  long fd = syscall(SYS_pidfd_getfd, (int)pidfd, 3, 0);
  int err = tc_err(fd);
  tc_add_errno("getfd", err);
  return tc_end(err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: userfaultfd lets an attacker stall kernel copies at will, the usual race-widening exploit aid.
 * Expected "userfaultfd: errno=EPERM" (denied by seccomp; /dev/userfaultfd is not in the sandbox /dev). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  long rc = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  return tc_single("userfaultfd", rc, errno);
}

/* Hostile: a nested user namespace would hand the process a full capability set again.
 * Expected "unshare_user: errno=EPERM": unshare is denied by seccomp (the kernel alone would allow it). */
#define _GNU_SOURCE
#include <sched.h>

#include "report.h"

int main(void) {
  long rc = unshare(CLONE_NEWUSER);
  return tc_single("unshare_user", rc, errno);
}

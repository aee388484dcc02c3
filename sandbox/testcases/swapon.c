/* Hostile: swapon/swapoff (host-wide memory management) on a path that does not exist.
 * Expected "swapon: swapon=EPERM swapoff=EPERM" (denied by seccomp; CAP_SYS_ADMIN dropped). */
#define _GNU_SOURCE
#include <sys/swap.h>

#include "report.h"

int main(void) {
  int on = tc_err(swapon("/tmp/hostile-no-such-swapfile", 0));
  int off = tc_err(swapoff("/tmp/hostile-no-such-swapfile"));
  tc_begin("swapon");
  tc_add_errno("swapon", on);
  tc_add_errno("swapoff", off);
  return tc_end(on == 0 || off == 0 ? TC_ESCAPED : TC_BLOCKED);
}

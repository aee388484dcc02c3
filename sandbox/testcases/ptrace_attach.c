/* Hostile: attaches to PID 1 (capsule-init, which holds the launcher's control channel).
 * Expected "ptrace_attach: attach=EPERM seize=EPERM" (seccomp denies ptrace; init is non-dumpable anyway). */
#define _GNU_SOURCE
#include <sys/ptrace.h>

#include "report.h"

int main(void) {
  int attach = tc_err(ptrace(PTRACE_ATTACH, 1, NULL, NULL));
  int seize = tc_err(ptrace(PTRACE_SEIZE, 1, NULL, NULL));
  tc_begin("ptrace_attach");
  tc_add_errno("attach", attach);
  tc_add_errno("seize", seize);
  return tc_end(attach == 0 || seize == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: PTRACE_TRACEME makes init (our parent) our tracer, the old route around seccomp via tracers.
 * Expected "ptrace_traceme: errno=EPERM" (ptrace is not in the allowlist). */
#define _GNU_SOURCE
#include <sys/ptrace.h>

#include "report.h"

int main(void) {
  long rc = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
  return tc_single("ptrace_traceme", rc, errno);
}

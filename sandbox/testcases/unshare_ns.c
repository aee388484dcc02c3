/* Hostile: new mount/net/pid/ipc/uts/cgroup/time namespaces without a new user namespace.
 * Expected every key =EPERM (seccomp denies unshare; no CAP_SYS_ADMIN either). */
#define _GNU_SOURCE
#include <sched.h>

#include "report.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

int main(void) {
  static const struct { const char *name; int flag; } kinds[] = {
      {"mnt", CLONE_NEWNS},   {"net", CLONE_NEWNET},       {"pid", CLONE_NEWPID},    {"ipc", CLONE_NEWIPC},
      {"uts", CLONE_NEWUTS},  {"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME},
  };
  int escaped = 0;
  tc_begin("unshare_ns");
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i) {
    int err = tc_err(unshare(kinds[i].flag));
    escaped |= err == 0;
    tc_add_errno(kinds[i].name, err);
  }
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

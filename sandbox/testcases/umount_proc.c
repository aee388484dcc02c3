/* Hostile: unmounts /proc, a masked /proc file and the read-only /proc/sys bind to reach what they cover.
 * Expected "umount_proc: proc=EPERM masked=EPERM proc_sys=EPERM" (seccomp denies umount2). */
#define _GNU_SOURCE
#include <sys/mount.h>

#include "report.h"

int main(void) {
  int sys = tc_err(umount2("/proc/sys", MNT_DETACH));
  int masked = tc_err(umount2("/proc/keys", MNT_DETACH));
  int proc = tc_err(umount2("/proc", MNT_DETACH));
  tc_begin("umount_proc");
  tc_add_errno("proc", proc);
  tc_add_errno("masked", masked);
  tc_add_errno("proc_sys", sys);
  return tc_end(proc == 0 || masked == 0 || sys == 0 ? TC_ESCAPED : TC_BLOCKED);
}

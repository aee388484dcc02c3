/* Helper for the hostile programs that probe OCI-masked /proc files: tells a /dev/null bind (masked) from
 * the real file. Included by sysrq_trigger.c and proc_kcore.c only. */
#ifndef CAPSULE_TESTCASES_MASKED_FILE_H
#define CAPSULE_TESTCASES_MASKED_FILE_H

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "report.h"

/* Opens `path` with `flags` and reports "NAME: masked" (a /dev/null bind), "NAME: errno=E..." or, when the
 * real file opened, "NAME: exposed" (exit 1). Nothing is read from or written to the file. */
static inline int tc_probe_masked(const char *name, const char *path, int flags) {
  int fd = open(path, flags | O_CLOEXEC);
  if (fd < 0) return tc_single(name, -1, errno);
  struct stat st;
  int is_null = fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
  close(fd);
  tc_begin(name);
  tc_add(NULL, is_null ? "masked" : "exposed");
  return tc_end(is_null ? TC_BLOCKED : TC_ESCAPED);
}

#endif

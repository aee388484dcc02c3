/* Hostile: perf events expose kernel addresses/timing side channels and have a history of kernel bugs.
 * Expected "perf_event_open: errno=EPERM" (denied by seccomp; the kernel alone allows self-monitoring). */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.exclude_kernel = 1;
  long rc = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  return tc_single("perf_event_open", rc, errno);
}

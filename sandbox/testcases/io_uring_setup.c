/* Hostile: io_uring performs syscalls the seccomp filter never sees.
 * Expected "io_uring_setup: errno=EPERM" (io_uring_* are denied by seccomp). */
#define _GNU_SOURCE
#include <linux/io_uring.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  struct io_uring_params params;
  memset(&params, 0, sizeof params);
  long rc = syscall(SYS_io_uring_setup, 8, &params);
  return tc_single("io_uring_setup", rc, errno);
}

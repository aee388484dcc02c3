/* Hostile: reads init's environment (which a careless launcher may fill with host secrets).
 * Expected "proc1_environ: errno=EACCES": /proc/PID/environ needs ptrace-read access to non-dumpable init. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  int fd = open("/proc/1/environ", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return tc_single("proc1_environ", -1, errno);
  char buffer[4096];
  ssize_t n = read(fd, buffer, sizeof buffer);
  tc_begin("proc1_environ");
  if (n < 0) {
    tc_add_errno("read", errno);
    return tc_end(TC_BLOCKED);
  }
  tc_add("read", n == 0 ? "empty" : "data");
  return tc_end(n == 0 ? TC_BLOCKED : TC_ESCAPED);
}

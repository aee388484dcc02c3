/* Hostile: opens sysfs attributes for writing: a global one under /sys/kernel and the loopback's mtu (owned
 * by the sandbox's own netns). Expected "sys_write: kernel=EROFS lo_mtu=EROFS" (/sys is mounted read-only). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

/* Opens for writing and closes again: nothing is ever written. */
static int try_open_write(const char *path) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  const char *kernel_path = argc > 1 ? argv[1] : "/sys/kernel/profiling";
  int kernel = try_open_write(kernel_path);
  int mtu = try_open_write("/sys/class/net/lo/mtu");
  tc_begin("sys_write");
  tc_add_errno("kernel", kernel);
  tc_add_errno("lo_mtu", mtu);
  return tc_end(kernel == 0 || mtu == 0 ? TC_ESCAPED : TC_BLOCKED);
}

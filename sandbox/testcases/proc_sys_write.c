/* Hostile: opens /proc/sys/kernel/hostname and a netns-owned sysctl for writing, and checks /proc/sys is a
 * read-only mount. Expected "proc_sys_write: hostname=EACCES ip_forward=EACCES ro=yes" (see hostile_test.cpp). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "report.h"

static int try_open_write(const char *path) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

int main(void) {
  int hostname = try_open_write("/proc/sys/kernel/hostname");
  int forward = try_open_write("/proc/sys/net/ipv4/ip_forward");
  struct statvfs vfs;
  if (statvfs("/proc/sys", &vfs) != 0) return tc_unsure("proc_sys_write", "statvfs", errno);
  int read_only = (vfs.f_flag & ST_RDONLY) != 0;
  tc_begin("proc_sys_write");
  tc_add_errno("hostname", hostname);
  tc_add_errno("ip_forward", forward);
  tc_add("ro", read_only ? "yes" : "no");
  return tc_end(hostname == 0 || forward == 0 || !read_only ? TC_ESCAPED : TC_BLOCKED);
}

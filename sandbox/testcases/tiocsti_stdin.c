/* Hostile: TIOCSTI on inherited descriptors 0-2, which could be the terminal of whoever started capsule.
 * Expected "tiocsti_stdin: fd0=EPERM fd1=EPERM fd2=EPERM": seccomp denies the request whatever the fd is. */
#define _GNU_SOURCE
#include <sys/ioctl.h>

#include "report.h"

int main(void) {
  char c = '\n';
  int escaped = 0;
  static const char *keys[] = {"fd0", "fd1", "fd2"};
  tc_begin("tiocsti_stdin");
  for (int fd = 0; fd < 3; ++fd) {
    int err = tc_err(ioctl(fd, TIOCSTI, &c));
    escaped |= err == 0;
    tc_add_errno(keys[fd], err);
  }
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

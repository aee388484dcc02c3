/* Hostile: TIOCSTI on inherited descriptors 0-2 (could be the terminal of whoever started capsule), and with
 * junk in the request's upper 32 bits (the kernel ignores them). Expected every key =EPERM. */
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
  /* ioctl's request is an unsigned int in the kernel but a 64-bit register for seccomp. */
  int hi = tc_err(ioctl(0, (unsigned long)TIOCSTI | (1UL << 32), &c));
  escaped |= hi == 0;
  tc_add_errno("hi32", hi);
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

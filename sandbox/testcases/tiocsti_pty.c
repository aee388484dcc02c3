/* Hostile: TIOCSTI pushes bytes into a terminal's input queue (typing commands into someone's shell).
 * Opens a fresh pty from /dev/ptmx; expected "tiocsti_pty: master=EPERM slave=EPERM" (arg-filtered ioctl). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return tc_unsure("tiocsti_pty", "open-ptmx", errno);
  if (grantpt(master) != 0 || unlockpt(master) != 0) return tc_unsure("tiocsti_pty", "unlockpt", errno);
  const char *name = ptsname(master);
  if (name == NULL) return tc_unsure("tiocsti_pty", "ptsname", errno);
  int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) return tc_unsure("tiocsti_pty", "open-pts", errno);
  char c = 'x';
  int on_master = tc_err(ioctl(master, TIOCSTI, &c));
  int on_slave = tc_err(ioctl(slave, TIOCSTI, &c));
  tc_begin("tiocsti_pty");
  tc_add_errno("master", on_master);
  tc_add_errno("slave", on_slave);
  return tc_end(on_master == 0 || on_slave == 0 ? TC_ESCAPED : TC_BLOCKED);
}

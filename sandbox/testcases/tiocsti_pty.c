/* Hostile: TIOCSTI (typing into a terminal's input queue) on a fresh pty made our controlling tty, where the
 * kernel alone allows it. Expected "tiocsti_pty: ctty=ok master=EPERM slave=EPERM slave_hi32=EPERM". */
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
  setsid(); /* EPERM when already a session leader (the launcher's setsid): either way we lead one */
  int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) return tc_unsure("tiocsti_pty", "open-pts", errno);
  int ctty = tc_err(ioctl(slave, TIOCSCTTY, 0));
  char c = 'x';
  int on_master = tc_err(ioctl(master, TIOCSTI, &c));
  int on_slave = tc_err(ioctl(slave, TIOCSTI, &c));
  /* The kernel truncates the request to 32 bits; a filter comparing all 64 would let this one through. */
  int on_slave_hi = tc_err(ioctl(slave, (unsigned long)TIOCSTI | (1UL << 32), &c));
  tc_begin("tiocsti_pty");
  tc_add_errno("ctty", ctty);
  tc_add_errno("master", on_master);
  tc_add_errno("slave", on_slave);
  tc_add_errno("slave_hi32", on_slave_hi);
  return tc_end(on_master == 0 || on_slave == 0 || on_slave_hi == 0 ? TC_ESCAPED : TC_BLOCKED);
}

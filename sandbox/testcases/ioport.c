/* Hostile: raw I/O port access (iopl/ioperm), direct hardware access on x86.
 * Expected "ioport: iopl=EPERM ioperm=EPERM" (CAP_SYS_RAWIO dropped, denied by seccomp). */
#define _GNU_SOURCE
#include <sys/io.h>

#include "report.h"

int main(void) {
  int iopl_err = tc_err(iopl(3));
  int ioperm_err = tc_err(ioperm(0x80, 1, 1));
  tc_begin("ioport");
  tc_add_errno("iopl", iopl_err);
  tc_add_errno("ioperm", ioperm_err);
  return tc_end(iopl_err == 0 || ioperm_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

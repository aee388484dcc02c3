/* Hostile: turns on process accounting (host-global; the kernel writes a record for every exit).
 * Expected "acct: errno=EPERM" (CAP_SYS_PACCT dropped, denied by seccomp). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  int fd = open("/tmp/hostile-acct", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  long rc = acct("/tmp/hostile-acct");
  if (rc == 0) acct(NULL);
  return tc_single("acct", rc, errno);
}

/* Hostile: reads the host kernel log (addresses, other tenants' activity) via syslog(2) and /dev/kmsg.
 * Expected "syslog_read: klogctl=EPERM kmsg=ENOENT" (syslog denied by seccomp; /dev/kmsg not in /dev). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/klog.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  char buffer[4096];
  int klog = tc_err(klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buffer, sizeof buffer));
  int kmsg = tc_err(open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  tc_begin("syslog_read");
  tc_add_errno("klogctl", klog);
  tc_add_errno("kmsg", kmsg);
  return tc_end(klog == 0 || kmsg == 0 ? TC_ESCAPED : TC_BLOCKED);
}

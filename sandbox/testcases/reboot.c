/* Hostile: reboot(2) with valid magic; the command is CAD_ON (harmless even if it ever reached a host).
 * Expected "reboot: errno=EPERM" (denied by seccomp; CAP_SYS_BOOT dropped). */
#define _GNU_SOURCE
#include <linux/reboot.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  long rc = syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_CAD_ON, NULL);
  return tc_single("reboot", rc, errno);
}

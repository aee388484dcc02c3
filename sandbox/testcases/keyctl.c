/* Hostile: the kernel keyring is not namespaced per container; joining/reading keyrings can leak host keys.
 * Expected "keyctl: errno=EPERM" (keyctl is denied by seccomp). */
#define _GNU_SOURCE
#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  long rc = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "capsule-hostile", 0, 0, 0);
  return tc_single("keyctl", rc, errno);
}

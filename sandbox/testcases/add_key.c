/* Hostile: add_key creates kernel keys (shared kernel state, quota exhaustion for the host uid).
 * Expected "add_key: errno=EPERM" (denied by seccomp). */
#define _GNU_SOURCE
#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  static const char payload[] = "secret";
  long rc = syscall(SYS_add_key, "user", "capsule-hostile", payload, sizeof payload - 1,
                    KEY_SPEC_SESSION_KEYRING);
  return tc_single("add_key", rc, errno);
}

/* Hostile: request_key can make the host kernel run /sbin/request-key upcalls on the host.
 * Expected "request_key: errno=EPERM" (denied by seccomp). */
#define _GNU_SOURCE
#include <linux/keyctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  long rc = syscall(SYS_request_key, "user", "capsule-hostile", "callout", KEY_SPEC_SESSION_KEYRING);
  return tc_single("request_key", rc, errno);
}

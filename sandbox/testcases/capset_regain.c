/* Hostile: capset to raise every capability again, and an ambient raise of CAP_SYS_ADMIN.
 * Expected "capset_regain: capset=EPERM ambient=EPERM" (permitted is empty, so nothing can be raised). */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capget, &header, data) != 0) return tc_unsure("capset_regain", "capget", errno);
  for (int i = 0; i < 2; ++i) {
    data[i].effective = data[i].permitted = data[i].inheritable = 0xffffffffu;
  }
  int capset_err = tc_err(syscall(SYS_capset, &header, data));
  int ambient_err = tc_err(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0));
  tc_begin("capset_regain");
  tc_add_errno("capset", capset_err);
  tc_add_errno("ambient", ambient_err);
  return tc_end(capset_err == 0 || ambient_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

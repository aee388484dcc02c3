/* Hostile: changes uid/gid to 1000 and sets supplementary groups (needs CAP_SETUID / CAP_SETGID).
 * Expected "setuid_change: setuid=EPERM setgid=EPERM setgroups=EPERM". */
#define _GNU_SOURCE
#include <grp.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  gid_t groups[1] = {1000};
  int groups_err = tc_err(setgroups(1, groups));
  int gid_err = tc_err(setgid(1000));
  int uid_err = tc_err(setuid(1000));
  tc_begin("setuid_change");
  tc_add_errno("setuid", uid_err);
  tc_add_errno("setgid", gid_err);
  tc_add_errno("setgroups", groups_err);
  return tc_end(uid_err == 0 || gid_err == 0 || groups_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: recursive bind of / onto /tmp (a writable copy of the tree) and a read-write remount of /usr.
 * Expected "mount_bind: bind=EPERM remount=EPERM" (seccomp denies mount). */
#define _GNU_SOURCE
#include <sys/mount.h>
#include <sys/stat.h>

#include "report.h"

int main(void) {
  mkdir("/tmp/rootcopy", 0755);
  int bind = tc_err(mount("/", "/tmp/rootcopy", NULL, MS_BIND | MS_REC, NULL));
  int remount = tc_err(mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL));
  tc_begin("mount_bind");
  tc_add_errno("bind", bind);
  tc_add_errno("remount", remount);
  return tc_end(bind == 0 || remount == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: joins init's namespaces through /proc/1/ns (non-dumpable init: EACCES), then setns on its own
 * (denied). Expected "setns_init: user=EACCES mnt=EACCES pid=EACCES net=EACCES self=EPERM". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  static const char *kinds[] = {"user", "mnt", "pid", "net"};
  char path[64];
  int escaped = 0;
  tc_begin("setns_init");
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i) {
    snprintf(path, sizeof path, "/proc/1/ns/%s", kinds[i]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      tc_add_errno(kinds[i], errno);
      continue;
    }
    /* Opened: report what joining does (success here would be an escape only if init differed). */
    int err = tc_err(setns(fd, 0));
    escaped |= err == 0;
    tc_add(kinds[i], err == 0 ? "joined" : tc_errno_name(err));
    close(fd);
  }
  int self_fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
  if (self_fd < 0) return tc_unsure("setns_init", "open-self-ns", errno);
  int self_err = tc_err(setns(self_fd, CLONE_NEWNS));
  escaped |= self_err == 0;
  tc_add_errno("self", self_err);
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

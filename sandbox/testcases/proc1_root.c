/* Hostile: reads a host marker file (argv[1], an absolute host path) through /proc/1/root, /proc/self/root
 * and directly. Expected "proc1_root: init=EACCES self=ENOENT direct=ENOENT" (init is non-dumpable). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

static int try_open(const char *prefix, const char *path) {
  char full[4096];
  snprintf(full, sizeof full, "%s%s", prefix, path);
  int fd = open(full, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] != '/') return tc_unsure("proc1_root", "usage", EINVAL);
  int init = try_open("/proc/1/root", argv[1]);
  int self = try_open("/proc/self/root", argv[1]);
  int direct = try_open("", argv[1]);
  tc_begin("proc1_root");
  tc_add_errno("init", init);
  tc_add_errno("self", self);
  tc_add_errno("direct", direct);
  return tc_end(init == 0 || self == 0 || direct == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: init's /proc entries that hand out host objects: cwd, exe (the host capsule-init binary),
 * fd/3 (the launcher channel), mem, maps. Expected every key =EACCES (init is non-dumpable). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  static const struct { const char *key; const char *path; int flags; } probes[] = {
      {"cwd", "/proc/1/cwd", O_RDONLY | O_DIRECTORY}, {"exe", "/proc/1/exe", O_RDONLY},
      {"fd3", "/proc/1/fd/3", O_PATH},                 {"mem", "/proc/1/mem", O_RDONLY},
      {"maps", "/proc/1/maps", O_RDONLY},
  };
  int escaped = 0;
  tc_begin("proc1_access");
  for (size_t i = 0; i < sizeof probes / sizeof probes[0]; ++i) {
    /* fd/3 is a socket: O_PATH follows the link (and its access check) without the socket's ENXIO. */
    int fd = open(probes[i].path, probes[i].flags | O_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    escaped |= err == 0;
    tc_add_errno(probes[i].key, err);
  }
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

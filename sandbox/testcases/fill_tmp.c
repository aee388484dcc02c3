/* Hostile: fills a tmpfs file (argv[1], default /tmp/fill) with zeros until a write fails, holding almost nothing
 * itself (linked statically, one 4 KiB buffer): tmpfs pages count against the box's memory but belong to no
 * process, so at the limit the OOM killer must still choose it over init. "fill_tmp: errno=ENOSPC" (or ENOMEM)
 * when a write failed; killed when the OOM killer took it. */
#define _GNU_SOURCE
#include <fcntl.h>

#include "report.h"

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : "/tmp/fill";
  static char zeros[4096];
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return tc_single("fill_tmp", -1, errno);
  for (;;) {
    if (write(fd, zeros, sizeof zeros) < 0) return tc_single("fill_tmp", -1, errno);
  }
}

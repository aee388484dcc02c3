/* Hostile: plants a setuid/setgid file in a writable bind (argv[1]); the test checks the host copy is not a
 * root-owned set-id file. Prints "setuid_plant: create=ok chmod=ok|E..." and exits 0: the host decides. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2) return tc_unsure("setuid_plant", "usage", EINVAL);
  char path[4096];
  snprintf(path, sizeof path, "%s/planted", argv[1]);
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0755);
  if (fd < 0) return tc_unsure("setuid_plant", "create", errno);
  static const char script[] = "#!/bin/sh\nid\n";
  if (write(fd, script, sizeof script - 1) < 0) return tc_unsure("setuid_plant", "write", errno);
  int chmod_err = tc_err(fchmod(fd, 06755));
  close(fd);
  tc_begin("setuid_plant");
  tc_add("create", "ok");
  tc_add_errno("chmod", chmod_err);
  return tc_end(TC_BLOCKED);
}

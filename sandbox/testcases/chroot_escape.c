/* Hostile: chroot(2), then the classic escape (chroot into a subdirectory, chdir("..") past the root, chroot
 * ".") and a look for a host marker (argv[1]). Expected "chroot_escape: chroot=EPERM marker=ENOENT". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] != '/') return tc_unsure("chroot_escape", "usage", EINVAL);
  int outside = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (outside < 0) return tc_unsure("chroot_escape", "open-root", errno);
  if (mkdir("/tmp/jail", 0755) != 0 && errno != EEXIST) return tc_unsure("chroot_escape", "mkdir", errno);
  int chroot_err = tc_err(chroot("/tmp/jail"));
  /* Whether or not the chroot worked, walk up from a descriptor outside it and re-root there. */
  if (fchdir(outside) != 0) return tc_unsure("chroot_escape", "fchdir", errno);
  for (int i = 0; i < 256; ++i) {
    if (chdir("..") != 0) break;
  }
  int second = tc_err(chroot("."));
  struct stat st;
  int marker = tc_err(stat(argv[1], &st));
  tc_begin("chroot_escape");
  tc_add_errno("chroot", chroot_err == 0 ? second : chroot_err);
  tc_add_errno("marker", marker);
  return tc_end(marker == 0 || chroot_err == 0 || second == 0 ? TC_ESCAPED : TC_BLOCKED);
}

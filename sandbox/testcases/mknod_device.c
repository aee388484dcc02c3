/* Hostile: creates device nodes (a char device for /dev/mem-like access, a block device for a host disk).
 * Expected "mknod_device: chr=EPERM blk=EPERM" (CAP_MKNOD is dropped; device nodes need it in the host ns). */
#define _GNU_SOURCE
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "report.h"

int main(void) {
  int chr = tc_err(mknod("/tmp/hostile-mem", S_IFCHR | 0600, makedev(1, 1)));
  int blk = tc_err(mknod("/tmp/hostile-disk", S_IFBLK | 0600, makedev(8, 0)));
  tc_begin("mknod_device");
  tc_add_errno("chr", chr);
  tc_add_errno("blk", blk);
  return tc_end(chr == 0 || blk == 0 ? TC_ESCAPED : TC_BLOCKED);
}

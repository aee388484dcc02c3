/* Hostile: loads a kernel module from memory and from a file, and unloads one (a name that does not exist).
 * Expected "init_module: init=EPERM finit=EPERM delete=EPERM" (denied by seccomp; CAP_SYS_MODULE dropped). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  static const char image[64] = "\177ELF";
  int init = tc_err(syscall(SYS_init_module, image, sizeof image, ""));
  int fd = open(argc > 0 ? argv[0] : "/proc/self/exe", O_RDONLY | O_CLOEXEC);
  int finit = tc_err(syscall(SYS_finit_module, fd, "", 0));
  int del = tc_err(syscall(SYS_delete_module, "capsule_hostile_no_such_module", O_NONBLOCK));
  tc_begin("init_module");
  tc_add_errno("init", init);
  tc_add_errno("finit", finit);
  tc_add_errno("delete", del);
  return tc_end(init == 0 || finit == 0 || del == 0 ? TC_ESCAPED : TC_BLOCKED);
}

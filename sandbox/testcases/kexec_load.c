/* Hostile: kexec_load / kexec_file_load (replace the running kernel). Arguments only unload, never load.
 * Expected "kexec_load: load=EPERM file_load=EPERM" (denied by seccomp; CAP_SYS_BOOT dropped). */
#define _GNU_SOURCE
#include <linux/kexec.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  int load = tc_err(syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0UL));
  int file_load = tc_err(syscall(SYS_kexec_file_load, -1, -1, 0UL, "", KEXEC_FILE_UNLOAD));
  tc_begin("kexec_load");
  tc_add_errno("load", load);
  tc_add_errno("file_load", file_load);
  return tc_end(load == 0 || file_load == 0 ? TC_ESCAPED : TC_BLOCKED);
}

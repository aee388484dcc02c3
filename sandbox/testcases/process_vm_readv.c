/* Hostile: reads init's memory with process_vm_readv (no ptrace attach needed, same access check).
 * Expected "process_vm_readv: errno=EPERM": init is non-dumpable and we hold no CAP_SYS_PTRACE. */
#define _GNU_SOURCE
#include <sys/uio.h>

#include "report.h"

int main(void) {
  char buffer[64];
  struct iovec local = {buffer, sizeof buffer};
  struct iovec remote = {(void *)0x400000, sizeof buffer};
  long rc = process_vm_readv(1, &local, 1, &remote, 1, 0);
  /* EFAULT would mean the access check passed and only the address was wrong: still an escape. */
  if (rc < 0 && errno == EFAULT) {
    tc_begin("process_vm_readv");
    tc_add("errno", "EFAULT");
    return tc_end(TC_ESCAPED);
  }
  return tc_single("process_vm_readv", rc, errno);
}

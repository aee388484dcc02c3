/* Hostile: opens /proc/kcore (physical memory of the host as an ELF core).
 * Expected "proc_kcore: masked" where the host kernel has it, "proc_kcore: errno=ENOENT" where it has not. */
#define _GNU_SOURCE
#include "masked_file.h"

int main(void) { return tc_probe_masked("proc_kcore", "/proc/kcore", O_RDONLY); }

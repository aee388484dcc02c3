/* Hostile: opens /proc/sysrq-trigger for writing (one byte there can crash or reboot the host).
 * Expected "sysrq_trigger: masked" where the host has the file, "sysrq_trigger: errno=ENOENT" where it has not. */
#define _GNU_SOURCE
#include "masked_file.h"

int main(void) { return tc_probe_masked("sysrq_trigger", "/proc/sysrq-trigger", O_WRONLY); }

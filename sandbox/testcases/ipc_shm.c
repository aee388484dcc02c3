/* Hostile: attaches to a System V shared memory segment (key argv[1], mode 0666) that the test created in the
 * host's IPC namespace. Expected "ipc_shm: errno=ENOENT": the sandbox has its own IPC namespace. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2) return tc_unsure("ipc_shm", "usage", EINVAL);
  key_t key = (key_t)strtol(argv[1], NULL, 0);
  int id = shmget(key, 0, 0);
  return tc_single("ipc_shm", id, errno);
}

/* Hostile: signals a host process (argv[1] is its host PID; it runs as the sandbox's host uid, so only the
 * PID namespace protects it). Expected "kill_host_pid: probe=ESRCH kill=ESRCH". */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>

#include "report.h"

int main(int argc, char **argv) {
  if (argc < 2) return tc_unsure("kill_host_pid", "usage", EINVAL);
  pid_t pid = (pid_t)atoi(argv[1]);
  if (pid <= 1) return tc_unsure("kill_host_pid", "pid", EINVAL);
  int probe = tc_err(kill(pid, 0));
  int killed = tc_err(kill(pid, SIGKILL));
  tc_begin("kill_host_pid");
  tc_add_errno("probe", probe);
  tc_add_errno("kill", killed);
  return tc_end(probe == 0 || killed == 0 ? TC_ESCAPED : TC_BLOCKED);
}

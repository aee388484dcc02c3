/* Hostile: forks until fork fails (argv[1] caps the attempt, default 4096), then kills its children.
 * Expected "fork_bomb: errno=EAGAIN" under a pids limit; "fork_bomb: ok" (exit 1) if the cap is reached. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

int main(int argc, char **argv) {
  long cap = argc > 1 ? atol(argv[1]) : 4096;
  int err = 0;
  for (long i = 0; i < cap; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
    if (pid < 0) {
      err = errno;
      break;
    }
  }
  kill(-1, SIGKILL); /* every other process in our PID namespace: the children (init is exempt) */
  while (wait(NULL) > 0 || errno == EINTR) {
  }
  return tc_single("fork_bomb", err == 0 ? 0 : -1, err);
}

/* Hostile: kill(-1, SIGKILL), "every process I may signal"; the test checks its host process survives.
 * Expected "kill_all: errno=ESRCH": in the sandbox's PID namespace only init (exempt) and we exist. */
#define _GNU_SOURCE
#include <signal.h>

#include "report.h"

int main(void) {
  long rc = kill(-1, SIGKILL);
  return tc_single("kill_all", rc, errno);
}

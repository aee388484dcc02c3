/* Hostile: sets the (global, not namespaced) realtime clock to the current time.
 * Expected "settime: clock_settime=EPERM settimeofday=EPERM" (CAP_SYS_TIME dropped, denied by seccomp). */
#define _GNU_SOURCE
#include <sys/time.h>
#include <time.h>

#include "report.h"

int main(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int settime_err = tc_err(clock_settime(CLOCK_REALTIME, &now));
  struct timeval tv;
  gettimeofday(&tv, NULL);
  int tod_err = tc_err(settimeofday(&tv, NULL));
  tc_begin("settime");
  tc_add_errno("clock_settime", settime_err);
  tc_add_errno("settimeofday", tod_err);
  return tc_end(settime_err == 0 || tod_err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

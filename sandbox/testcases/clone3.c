/* Hostile: raw clone3(2), whose flags live in memory where seccomp cannot inspect them.
 * Expected "clone3: plain=ENOSYS newuser=ENOSYS": the profile answers ENOSYS so libcs fall back to clone. */
#define _GNU_SOURCE
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

static int try_clone3(uint64_t flags) {
  struct clone_args args;
  memset(&args, 0, sizeof args);
  args.flags = flags;
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) _exit(0);
  if (pid < 0) return errno;
  waitpid((pid_t)pid, NULL, 0);
  return 0;
}

int main(void) {
  int plain = try_clone3(0);
  int user = try_clone3(CLONE_NEWUSER);
  tc_begin("clone3");
  tc_add_errno("plain", plain);
  tc_add_errno("newuser", user);
  return tc_end(user == 0 ? TC_ESCAPED : plain == 0 ? TC_UNSURE : TC_BLOCKED);
}

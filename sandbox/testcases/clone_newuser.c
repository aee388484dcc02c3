/* Hostile: raw clone(2) with namespace flags, bypassing glibc (the argument filter must still catch it).
 * Expected "clone_newuser: newuser=EPERM newns=EPERM newnet=EPERM newpid=EPERM". */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

static int try_clone(unsigned long flags) {
  long pid = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);
  if (pid == 0) _exit(0); /* the child of a successful clone: leave at once */
  if (pid < 0) return errno;
  waitpid((pid_t)pid, NULL, 0);
  return 0;
}

int main(void) {
  int user = try_clone(CLONE_NEWUSER);
  int ns = try_clone(CLONE_NEWNS);
  int net = try_clone(CLONE_NEWNET);
  int pid = try_clone(CLONE_NEWPID);
  tc_begin("clone_newuser");
  tc_add_errno("newuser", user);
  tc_add_errno("newns", ns);
  tc_add_errno("newnet", net);
  tc_add_errno("newpid", pid);
  return tc_end(user == 0 || ns == 0 || net == 0 || pid == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: unshare(CLONE_NEWUSER) through the i386 (int 0x80) and x32 syscall ABIs, where a filter written for
 * x86_64 numbers alone would not match. Each runs in a child; prints errno names or the killing signal. */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"

#define I386_NR_UNSHARE 310
#define X32_SYSCALL_BIT 0x40000000L

static long int80_unshare(long flags) {
  long ret;
  __asm__ volatile("int $0x80" : "=a"(ret) : "a"(I386_NR_UNSHARE), "b"(flags) : "memory", "r8", "r9", "r10", "r11");
  return ret;
}

/* Runs one attempt in a child: exit 0 = the unshare worked, 100+errno = it failed, or a signal. */
static const char *attempt(int abi) {
  pid_t pid = fork();
  if (pid < 0) return "fork-failed";
  if (pid == 0) {
    long rc = abi == 0 ? int80_unshare(CLONE_NEWUSER) : syscall(X32_SYSCALL_BIT | SYS_unshare, CLONE_NEWUSER);
    int err = abi == 0 ? (rc < 0 ? (int)-rc : 0) : (rc < 0 ? errno : 0);
    _exit(err == 0 ? 0 : 100 + (err > 100 ? 100 : err));
  }
  int status;
  if (waitpid(pid, &status, 0) < 0) return "wait-failed";
  if (WIFSIGNALED(status)) return tc_signal_name(WTERMSIG(status));
  if (WEXITSTATUS(status) == 0) return "ok";
  return tc_errno_name(WEXITSTATUS(status) - 100);
}

int main(void) {
  char i386[32], x32[32];
  snprintf(i386, sizeof i386, "%s", attempt(0));
  snprintf(x32, sizeof x32, "%s", attempt(1));
  tc_begin("compat_syscall");
  tc_add("i386", i386);
  tc_add("x32", x32);
  return tc_end(strcmp(i386, "ok") == 0 || strcmp(x32, "ok") == 0 ? TC_ESCAPED : TC_BLOCKED);
}

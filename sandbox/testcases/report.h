/* Shared output convention of the hostile programs: one line "NAME: key=VALUE ..." on stdout, where VALUE
 * is an errno name (EPERM), "ok" when the call succeeded, or a word; exit 0 blocked, 1 escaped, 2 unsure. */
#ifndef CAPSULE_TESTCASES_REPORT_H
#define CAPSULE_TESTCASES_REPORT_H

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Exit codes: every attempt failed as it should / something got through / the probe itself broke. */
enum { TC_BLOCKED = 0, TC_ESCAPED = 1, TC_UNSURE = 2 };

static inline const char *tc_errno_name(int err) {
  switch (err) {
    case 0: return "ok";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ESRCH: return "ESRCH";
    case EINTR: return "EINTR";
    case EIO: return "EIO";
    case ENXIO: return "ENXIO";
    case E2BIG: return "E2BIG";
    case ENOEXEC: return "ENOEXEC";
    case EBADF: return "EBADF";
    case ECHILD: return "ECHILD";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    case EBUSY: return "EBUSY";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case ENODEV: return "ENODEV";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case ENFILE: return "ENFILE";
    case EMFILE: return "EMFILE";
    case ENOTTY: return "ENOTTY";
    case ETXTBSY: return "ETXTBSY";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case ESPIPE: return "ESPIPE";
    case EROFS: return "EROFS";
    case EMLINK: return "EMLINK";
    case EPIPE: return "EPIPE";
    case ERANGE: return "ERANGE";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOSYS: return "ENOSYS";
    case ENOTEMPTY: return "ENOTEMPTY";
    case ELOOP: return "ELOOP";
    case ENOKEY: return "ENOKEY";
    case ENODATA: return "ENODATA";
    case EOVERFLOW: return "EOVERFLOW";
    case EBADMSG: return "EBADMSG";
    case ENOTSOCK: return "ENOTSOCK";
    case EPROTOTYPE: return "EPROTOTYPE";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case ESOCKTNOSUPPORT: return "ESOCKTNOSUPPORT";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case ENETDOWN: return "ENETDOWN";
    case ENETUNREACH: return "ENETUNREACH";
    case ECONNRESET: return "ECONNRESET";
    case EISCONN: return "EISCONN";
    case ENOTCONN: return "ENOTCONN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ECONNREFUSED: return "ECONNREFUSED";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case EALREADY: return "EALREADY";
    case EINPROGRESS: return "EINPROGRESS";
    case EDQUOT: return "EDQUOT";
    case ECANCELED: return "ECANCELED";
    case EKEYREJECTED: return "EKEYREJECTED";
    case EKEYREVOKED: return "EKEYREVOKED";
    case EKEYEXPIRED: return "EKEYEXPIRED";
    case EOWNERDEAD: return "EOWNERDEAD";
    default: {
      static char unknown[32];
      snprintf(unknown, sizeof unknown, "errno%d", err);
      return unknown;
    }
  }
}

static inline const char *tc_signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGTERM: return "SIGTERM";
    case SIGSYS: return "SIGSYS";
    default: return "SIG?";
  }
}

/* The line being built; written with one write(2) so that fork() never duplicates buffered output. */
static char tc_line[2048];
static size_t tc_line_len;

static inline void tc_append(const char *text) {
  size_t n = strlen(text);
  if (tc_line_len + n >= sizeof tc_line - 2) n = sizeof tc_line - 2 - tc_line_len;
  memcpy(tc_line + tc_line_len, text, n);
  tc_line_len += n;
  tc_line[tc_line_len] = '\0';
}

/* Starts the line: "NAME:". */
static inline void tc_begin(const char *name) {
  tc_line_len = 0;
  tc_line[0] = '\0';
  tc_append(name);
  tc_append(":");
}

/* Appends " KEY=VALUE" (or " VALUE" when key is NULL). */
static inline void tc_add(const char *key, const char *value) {
  tc_append(" ");
  if (key != NULL) {
    tc_append(key);
    tc_append("=");
  }
  tc_append(value);
}

/* Appends " KEY=ENAME", or " KEY=ok" for err == 0. */
static inline void tc_add_errno(const char *key, int err) { tc_add(key, tc_errno_name(err)); }

/* errno of a syscall-style return value: 0 when it succeeded. */
static inline int tc_err(long rc) { return rc < 0 ? errno : 0; }

/* Writes the line and returns the exit code to use. */
static inline int tc_end(int code) {
  tc_append("\n");
  size_t done = 0;
  while (done < tc_line_len) {
    ssize_t n = write(STDOUT_FILENO, tc_line + done, tc_line_len - done);
    if (n <= 0) break;
    done += (size_t)n;
  }
  return code;
}

/* The whole report of a single attempt: "NAME: errno=ENAME" (blocked) or "NAME: ok" (escaped). */
static inline int tc_single(const char *name, long rc, int err) {
  tc_begin(name);
  if (rc >= 0) {
    tc_add(NULL, "ok");
    return tc_end(TC_ESCAPED);
  }
  tc_add_errno("errno", err);
  return tc_end(TC_BLOCKED);
}

/* Prints "NAME: setup-failed=STEP:ENAME" and returns TC_UNSURE: the probe could not even try. */
static inline int tc_unsure(const char *name, const char *step, int err) {
  tc_begin(name);
  tc_append(" setup-failed=");
  tc_append(step);
  tc_append(":");
  tc_append(tc_errno_name(err));
  return tc_end(TC_UNSURE);
}

#endif

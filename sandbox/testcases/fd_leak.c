/* Hostile (audit): descriptors inherited beyond 0-2 (a leaked host directory or the launcher channel would
 * be a way out). Expected "fd_leak: none"; else "fd_leak: fdN=TARGET ..." (exit 1). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "report.h"

int main(void) {
  DIR *dir = opendir("/proc/self/fd");
  if (dir == NULL) return tc_unsure("fd_leak", "opendir", errno);
  int own = dirfd(dir);
  int leaks = 0;
  tc_begin("fd_leak");
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
    if (entry->d_name[0] == '.') continue;
    int fd = atoi(entry->d_name);
    if (fd <= 2 || fd == own) continue;
    char link[64], target[256], key[32];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n < 0 ? 0 : n] = '\0';
    snprintf(key, sizeof key, "fd%d", fd);
    tc_add(key, target);
    ++leaks;
  }
  closedir(dir);
  if (leaks == 0) tc_add(NULL, "none");
  return tc_end(leaks == 0 ? TC_BLOCKED : TC_ESCAPED);
}

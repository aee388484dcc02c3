/* Hostile (audit): looks for device nodes beyond the minimal set in /dev, /dev/pts and /dev/shm (disks,
 * /dev/mem, /dev/kmsg, fuse, tun...). Expected "dev_nodes: ok"; else "dev_nodes: unexpected=..." (exit 1). */
#define _GNU_SOURCE
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "report.h"

static char unexpected[1024];

static int allowed(const char *dir, const char *name, const struct stat *st) {
  static const char *top[] = {"null", "zero", "full", "random", "urandom", "tty", "ptmx"};
  if (S_ISBLK(st->st_mode)) return 0;
  if (!S_ISCHR(st->st_mode)) return 1;
  if (strcmp(dir, "/dev") == 0) {
    for (size_t i = 0; i < sizeof top / sizeof top[0]; ++i) {
      if (strcmp(name, top[i]) == 0) return 1;
    }
    return 0;
  }
  /* /dev/pts: ptmx (5:2) and the pty slaves of this devpts instance (136-143:*). */
  if (strcmp(dir, "/dev/pts") == 0) {
    return strcmp(name, "ptmx") == 0 || (major(st->st_rdev) >= 136 && major(st->st_rdev) <= 143);
  }
  return 0;
}

static void scan(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return;
  for (struct dirent *entry; (entry = readdir(d)) != NULL;) {
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
    if (lstat(path, &st) != 0 || allowed(dir, entry->d_name, &st)) continue;
    if (unexpected[0] != '\0') strncat(unexpected, ",", sizeof unexpected - strlen(unexpected) - 1);
    strncat(unexpected, path, sizeof unexpected - strlen(unexpected) - 1);
  }
  closedir(d);
}

int main(void) {
  scan("/dev");
  scan("/dev/pts");
  scan("/dev/shm");
  tc_begin("dev_nodes");
  if (unexpected[0] == '\0') {
    tc_add(NULL, "ok");
    return tc_end(TC_BLOCKED);
  }
  tc_add("unexpected", unexpected);
  return tc_end(TC_ESCAPED);
}

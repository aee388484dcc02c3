/* Hostile: checks every OCI masked path is absent, a /dev/null bind, or an empty directory.
 * Expected "masked_paths: ok"; otherwise "masked_paths: exposed=PATH,PATH" (exit 1). */
#define _GNU_SOURCE
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "report.h"

static int is_masked(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT;
  if (S_ISCHR(st.st_mode)) return major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
  if (!S_ISDIR(st.st_mode)) return 0;
  DIR *dir = opendir(path);
  if (dir == NULL) return errno == EACCES;
  int entries = 0;
  for (struct dirent *entry; (entry = readdir(dir)) != NULL;) {
    if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0) ++entries;
  }
  closedir(dir);
  return entries == 0;
}

int main(void) {
  static const char *paths[] = {
      "/proc/acpi",        "/proc/asound",        "/proc/interrupts", "/proc/kcore",
      "/proc/keys",        "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
      "/proc/sched_debug", "/proc/scsi",          "/sys/firmware",    "/sys/devices/virtual/powercap",
      "/sys/kernel/debug", "/sys/kernel/security",
  };
  char exposed[1024] = "";
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; ++i) {
    if (is_masked(paths[i])) continue;
    if (exposed[0] != '\0') strncat(exposed, ",", sizeof exposed - strlen(exposed) - 1);
    strncat(exposed, paths[i], sizeof exposed - strlen(exposed) - 1);
  }
  tc_begin("masked_paths");
  if (exposed[0] == '\0') {
    tc_add(NULL, "ok");
    return tc_end(TC_BLOCKED);
  }
  tc_add("exposed", exposed);
  return tc_end(TC_ESCAPED);
}

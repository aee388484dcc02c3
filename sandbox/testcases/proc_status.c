/* Hostile (audit): what the kernel says about our privileges: all five capability sets, no_new_privs,
 * seccomp mode. Expected all Cap* zero, NoNewPrivs=1, Seccomp=2 (exit 1 otherwise). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

int main(void) {
  static const char *fields[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"};
  char values[7][64];
  for (int i = 0; i < 7; ++i) strcpy(values[i], "missing");
  FILE *status = fopen("/proc/self/status", "re");
  if (status == NULL) return tc_unsure("proc_status", "open", errno);
  char line[256];
  while (fgets(line, sizeof line, status) != NULL) {
    for (int i = 0; i < 7; ++i) {
      size_t n = strlen(fields[i]);
      if (strncmp(line, fields[i], n) != 0 || line[n] != ':') continue;
      char *value = line + n + 1;
      while (*value == ' ' || *value == '\t') ++value;
      value[strcspn(value, "\n")] = '\0';
      snprintf(values[i], sizeof values[i], "%s", value);
    }
  }
  fclose(status);
  int escaped = 0;
  tc_begin("proc_status");
  for (int i = 0; i < 7; ++i) {
    tc_add(fields[i], values[i]);
    if (i < 5) escaped |= strtoull(values[i], NULL, 16) != 0 || strcmp(values[i], "missing") == 0;
  }
  escaped |= strcmp(values[5], "1") != 0 || strcmp(values[6], "2") != 0;
  return tc_end(escaped ? TC_ESCAPED : TC_BLOCKED);
}

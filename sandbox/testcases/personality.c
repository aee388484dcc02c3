/* Hostile: personality(READ_IMPLIES_EXEC) makes every readable mapping executable (weakens exploit defences).
 * Expected "personality: query=ok errno=EPERM": only the Docker-allowed personas pass the filter. */
#define _GNU_SOURCE
#include <sys/personality.h>

#include "report.h"

int main(void) {
  int query = personality(0xffffffff) < 0 ? errno : 0;
  int rc = personality(READ_IMPLIES_EXEC);
  int err = rc < 0 ? errno : 0;
  tc_begin("personality");
  tc_add_errno("query", query);
  tc_add_errno("errno", err);
  return tc_end(err == 0 ? TC_ESCAPED : TC_BLOCKED);
}

/* Hostile: sethostname / setdomainname (the test checks the host's hostname is unchanged, too).
 * Expected "sethostname: hostname=EPERM domainname=EPERM" (CAP_SYS_ADMIN dropped). */
#define _GNU_SOURCE
#include <unistd.h>

#include "report.h"

int main(void) {
  static const char name[] = "pwned-by-capsule-hostile";
  int host = tc_err(sethostname(name, sizeof name - 1));
  int domain = tc_err(setdomainname(name, sizeof name - 1));
  tc_begin("sethostname");
  tc_add_errno("hostname", host);
  tc_add_errno("domainname", domain);
  return tc_end(host == 0 || domain == 0 ? TC_ESCAPED : TC_BLOCKED);
}

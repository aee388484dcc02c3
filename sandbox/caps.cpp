// Drops every capability and switches ids, in the order the kernel requires:
// bounding + ambient first (needs CAP_SETPCAP), then ids, then the process sets.
#include "sandbox/caps.h"

#include <grp.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/error.h"

namespace capsule::sandbox {

void drop_privileges(unsigned uid, unsigned gid) {
  for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (cap_drop_bound(cap) != 0 && errno != EINVAL) throw_errno("caps", "", "drop bounding capability");
  }
  if (cap_reset_ambient() != 0) throw_errno("caps", "", "clear ambient capabilities");
  if (setgroups(0, nullptr) != 0) throw_errno("caps", "", "setgroups");
  if (setresgid(gid, gid, gid) != 0) throw_errno("caps", "", "setresgid " + std::to_string(gid));
  if (setresuid(uid, uid, uid) != 0) throw_errno("caps", "", "setresuid " + std::to_string(uid));
  cap_t empty = cap_init();
  if (empty == nullptr) throw_errno("caps", "", "cap_init");
  int rc = cap_set_proc(empty);
  int saved = errno;
  cap_free(empty);
  errno = saved;
  if (rc != 0) throw_errno("caps", "", "clear effective/permitted/inheritable");
}

void set_no_new_privs() {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) throw_errno("caps", "", "PR_SET_NO_NEW_PRIVS");
}

}  // namespace capsule::sandbox

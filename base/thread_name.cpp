// Thread names through prctl(PR_SET_NAME), which names the calling thread only (comm of /proc/<pid>/task/<tid>);
// longer names are cut to the kernel's 15 bytes here, not refused.
#include "base/thread_name.h"

#include <sys/prctl.h>

#include <string>

namespace capsule::base {

void name_this_thread(std::string_view name) {
  const std::string kernel_name(name.substr(0, 15));
  (void)prctl(PR_SET_NAME, kernel_name.c_str(), 0, 0, 0);
}

}  // namespace capsule::base

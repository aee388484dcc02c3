// setrlimit for the command's process; RLIMIT_CORE is always 0 so no core files leave the sandbox.
// Values above the inherited hard limit fail with a clear error rather than being clamped silently.
#include "sandbox/rlimits.h"

#include <sys/resource.h>

#include <string>

#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

void set_limit(int resource, const char* name, rlim_t value) {
  rlimit limit{value, value};
  if (setrlimit(resource, &limit) != 0) throw_errno("rlimits", name, "setrlimit to " + std::to_string(value));
}

}  // namespace

void apply_rlimits(const RlimitSettings& settings) {
  set_limit(RLIMIT_CORE, "RLIMIT_CORE", 0);
  if (settings.nofile != 0) set_limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", settings.nofile);
  set_limit(RLIMIT_FSIZE, "RLIMIT_FSIZE", settings.fsize_bytes == 0 ? RLIM_INFINITY : settings.fsize_bytes);
  if (settings.stack_bytes != 0) set_limit(RLIMIT_STACK, "RLIMIT_STACK", settings.stack_bytes);
}

}  // namespace capsule::sandbox

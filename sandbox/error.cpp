// The sandbox's throw helpers: the launcher's failures are SandboxErrors so it can tell them from other
// failures and report them as setup_failed with their cause.
#include "sandbox/error.h"

#include <cerrno>

namespace capsule::sandbox {

void throw_errno(const std::string& step, const std::string& path, const std::string& detail) {
  throw SandboxError(base::Cause{step, path, errno, detail});
}

void throw_error(const std::string& step, const std::string& path, const std::string& detail) {
  throw SandboxError(base::Cause{step, path, 0, detail});
}

}  // namespace capsule::sandbox

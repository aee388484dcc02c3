// SandboxError: a launch failure (a base::Error with its cause) that the launcher turns into a setup_failed
// Result. Every sandbox facility throws it through throw_errno / throw_error below.
#pragma once

#include <string>

#include "base/error.h"

namespace capsule::sandbox {

class SandboxError : public base::Error {
 public:
  explicit SandboxError(base::Cause cause) : base::Error(std::move(cause), "setup_failed") {}
};

// Throws SandboxError{step, path, errno, detail} using the current errno.
[[noreturn]] void throw_errno(const std::string& step, const std::string& path, const std::string& detail = {});
// Throws a SandboxError without an errno.
[[noreturn]] void throw_error(const std::string& step, const std::string& path, const std::string& detail);

}  // namespace capsule::sandbox

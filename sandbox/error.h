// SandboxError: a launch failure (a base::Error with its cause) that the launcher turns into a setup_failed
// Result. Every sandbox facility throws it through throw_errno / throw_error below.
#pragma once

#include <string>

#include "base/error.h"

namespace capsule::sandbox {

class SandboxError : public base::Error {
 public:
  explicit SandboxError(base::Cause cause) : base::Error(std::move(cause), "setup_failed") {}
  // A launch refused for a reason a caller should see by its own code (e.g. "insufficient_storage": the
  // sandbox's disk does not fit on the host), with a message written for a person.
  SandboxError(base::Cause cause, std::string code, const std::string& message)
      : base::Error(std::move(cause), std::move(code), message) {}
};

// Throws SandboxError{step, path, errno, detail} using the current errno.
[[noreturn]] void throw_errno(const std::string& step, const std::string& path, const std::string& detail = {});
// Throws a SandboxError without an errno.
[[noreturn]] void throw_error(const std::string& step, const std::string& path, const std::string& detail);

}  // namespace capsule::sandbox

// SandboxError: a launch failure that carries its cause (step, path, errno) up to the API.
// Every sandbox facility throws this; the launcher turns it into a setup_failed Result.
#pragma once

#include <stdexcept>
#include <string>

namespace capsule::sandbox {

struct ErrorCause {
  std::string step;   // e.g. "mount", "cgroup", "seccomp", "exec"
  std::string path;   // file or mount target involved, if any
  int errno_value = 0;
  std::string detail; // free text: what was being attempted

  // "mount /proc: Operation not permitted (mounting proc)"
  std::string describe() const;
};

class SandboxError : public std::runtime_error {
 public:
  explicit SandboxError(ErrorCause cause);
  const ErrorCause& cause() const { return cause_; }

 private:
  ErrorCause cause_;
};

// Throws SandboxError{step, path, errno, detail} using the current errno.
[[noreturn]] void throw_errno(const std::string& step, const std::string& path, const std::string& detail = {});
// Throws a SandboxError without an errno.
[[noreturn]] void throw_error(const std::string& step, const std::string& path, const std::string& detail);

}  // namespace capsule::sandbox

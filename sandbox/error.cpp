// SandboxError formatting and throw helpers.
// Kept tiny so every facility reports failures the same way.
#include "sandbox/error.h"

#include <cerrno>
#include <cstring>

namespace capsule::sandbox {

std::string ErrorCause::describe() const {
  std::string text = step;
  if (!path.empty()) text += " " + path;
  if (errno_value != 0) text += std::string(": ") + std::strerror(errno_value);
  if (!detail.empty()) text += (errno_value != 0 ? " (" + detail + ")" : ": " + detail);
  return text;
}

SandboxError::SandboxError(ErrorCause cause) : std::runtime_error(cause.describe()), cause_(std::move(cause)) {}

void throw_errno(const std::string& step, const std::string& path, const std::string& detail) {
  throw SandboxError(ErrorCause{step, path, errno, detail});
}

void throw_error(const std::string& step, const std::string& path, const std::string& detail) {
  throw SandboxError(ErrorCause{step, path, 0, detail});
}

}  // namespace capsule::sandbox

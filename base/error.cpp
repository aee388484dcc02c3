// base::Error formatting and throw helpers, so every module reports a failure the same way:
// "step path: strerror (detail)".
#include "base/error.h"

#include <cerrno>
#include <cstring>

namespace capsule::base {

std::string Cause::describe() const {
  std::string text = step;
  if (!path.empty()) text += " " + path;
  if (errno_value != 0) text += std::string(": ") + std::strerror(errno_value);
  if (!detail.empty()) text += (errno_value != 0 ? " (" + detail + ")" : ": " + detail);
  return text;
}

Error::Error(Cause cause, std::string code)
    : std::runtime_error(cause.describe()), cause_(std::move(cause)), code_(std::move(code)) {}

Error::Error(std::string code, const std::string& message)
    : std::runtime_error(message), cause_{"", "", 0, message}, code_(std::move(code)) {}

Error::Error(Cause cause, std::string code, const std::string& message)
    : std::runtime_error(message), cause_(std::move(cause)), code_(std::move(code)) {}

bool is_out_of_space(int errno_value) { return errno_value == ENOSPC || errno_value == EDQUOT; }

void throw_errno(const std::string& step, const std::string& path, const std::string& detail) {
  throw Error(Cause{step, path, errno, detail});
}

void throw_error(const std::string& step, const std::string& path, const std::string& detail) {
  throw Error(Cause{step, path, 0, detail});
}

}  // namespace capsule::base

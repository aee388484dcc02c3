// The one error convention: every module's error is a base::Error carrying a Cause (step, path, errno, detail)
// and a stable code; the API edge maps the code to an HTTP status in one table (http/error_status.h).
#pragma once

#include <stdexcept>
#include <string>

namespace capsule::base {

struct Cause {
  std::string step;    // what was being done: "mount", "cgroup", "blob", "upstream", "spec", ...
  std::string path;    // the file, mount target, digest, URL or field involved, if any
  int errno_value = 0;
  std::string detail;  // free text: what went wrong or was being attempted

  // "mount /proc: Operation not permitted (mounting proc)"; "blob sha256:ab..: truncated"
  std::string describe() const;
};

// A failure with its cause. `code` is a stable machine-readable token ("invalid_spec", "not_found",
// "upstream_unavailable", ...); "internal_error" when the failure is not the caller's (an HTTP 500 at the edge).
class Error : public std::runtime_error {
 public:
  explicit Error(Cause cause, std::string code = "internal_error");
  // A caller-facing failure whose message is the whole story (no step/path prefix): what() == message.
  Error(std::string code, const std::string& message);
  // A failure with its cause whose message is written for a person rather than built from the cause
  // ("cannot connect to capsuled at /run/capsule.sock: ..."): what() == message.
  Error(Cause cause, std::string code, const std::string& message);

  const Cause& cause() const { return cause_; }
  const std::string& code() const { return code_; }

 private:
  Cause cause_;
  std::string code_;
};

// Whether `errno_value` says a filesystem is full (ENOSPC) or a quota is used up (EDQUOT): a failure a caller
// hears as "insufficient_storage" (507), whatever step met it.
bool is_out_of_space(int errno_value);

// Throws base::Error{step, path, errno, detail} with the current errno.
[[noreturn]] void throw_errno(const std::string& step, const std::string& path, const std::string& detail = {});
// Throws base::Error{step, path, detail} without an errno.
[[noreturn]] void throw_error(const std::string& step, const std::string& path, const std::string& detail);

}  // namespace capsule::base

// cp -a by coreutils rather than a walk of our own: it knows every file type and xattr namespace overlayfs
// uses, and copies a hostile tree without following its links. posix_spawn: safe from any thread.
#include "sandbox/copy_tree.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>

#include "sandbox/error.h"

extern char** environ;

namespace capsule::sandbox {

void copy_tree_contents(const std::string& source, const std::string& dest) {
  std::error_code ec;
  std::filesystem::create_directories(dest, ec);
  if (ec) throw SandboxError(base::Cause{"copy", dest, ec.value(), "create"});
  const std::string from = source + "/.";
  const char* argv[] = {"cp", "-a", "--reflink=auto", "--", from.c_str(), dest.c_str(), nullptr};
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, "/bin/cp", nullptr, nullptr, const_cast<char* const*>(argv), environ); err != 0) {
    throw SandboxError(base::Cause{"copy", "/bin/cp", err, "posix_spawn"});
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw_error("copy", dest, "cp -a of " + source + " failed (status " + std::to_string(status) + ")");
  }
}

}  // namespace capsule::sandbox

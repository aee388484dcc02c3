// cp -a by coreutils rather than a walk of our own: it knows every file type and xattr namespace overlayfs
// uses, and copies a hostile tree without following its links. posix_spawn: safe from any thread.
#include "sandbox/copy_tree.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/unique_fd.h"
#include "sandbox/error.h"

extern char** environ;

namespace capsule::sandbox {
namespace {

constexpr std::size_t kStderrTail = 2048;

// Whether a line of cp's stderr ends with ": <strerror(error)>", as its failures do (names are quoted: a file named
// after the message cannot end a line with it).
bool said(const std::string& output, int error) {
  const std::string ending = std::string(": ") + std::strerror(error);
  for (std::size_t start = 0; start < output.size();) {
    std::size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    if (end - start >= ending.size() && output.compare(end - ending.size(), ending.size(), ending) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

void copy_tree_contents(const std::string& source, const std::string& dest) {
  std::error_code ec;
  std::filesystem::create_directories(dest, ec);
  if (ec) throw SandboxError(base::Cause{"copy", dest, ec.value(), "create"});
  const std::string from = source + "/.";
  const char* argv[] = {"cp", "-a", "--reflink=auto", "--", from.c_str(), dest.c_str(), nullptr};
  // cp's messages in the C locale: the cause is read from them (a full destination is ENOSPC to callers).
  std::vector<char*> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, "LC_ALL=", 7) != 0) env.push_back(*entry);
  }
  std::string c_locale = "LC_ALL=C";
  env.push_back(c_locale.data());
  env.push_back(nullptr);
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw_errno("copy", dest, "pipe2");
  base::UniqueFd read_end(err_pipe[0]);
  base::UniqueFd write_end(err_pipe[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDERR_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/bin/cp", &actions, nullptr, const_cast<char* const*>(argv), env.data());
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (spawned != 0) throw SandboxError(base::Cause{"copy", "/bin/cp", spawned, "posix_spawn"});
  std::string tail;  // the last of what cp said: all of it is read, so it never blocks on a full pipe
  char buffer[1024];
  for (ssize_t n; (n = read(read_end.get(), buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    tail.append(buffer, static_cast<std::size_t>(n));
    if (tail.size() > kStderrTail) tail.erase(0, tail.size() - kStderrTail);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    const int cause = said(tail, ENOSPC) ? ENOSPC : said(tail, EDQUOT) ? EDQUOT : 0;
    throw SandboxError(base::Cause{"copy", dest, cause,
                                   "cp -a of " + source + " failed (status " + std::to_string(status) + ")" +
                                       (tail.empty() ? "" : ": " + tail)});
  }
}

}  // namespace capsule::sandbox

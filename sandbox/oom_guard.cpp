// prefer_for_oom_kill: one write to the box's own procfs from a freshly forked command process (nothing
// allocated: init is single-threaded, but the child's only job until execve is to get there).
#include "sandbox/oom_guard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace capsule::sandbox {

int prefer_for_oom_kill() {
  static constexpr char kMaximum[] = "1000";  // OOM_SCORE_ADJ_MAX
  const int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t length = sizeof kMaximum - 1;
  const int error = write(fd, kMaximum, static_cast<std::size_t>(length)) == length ? 0 : errno;
  close(fd);
  return error;
}

}  // namespace capsule::sandbox

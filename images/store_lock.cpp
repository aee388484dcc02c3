// StoreLock: open(O_CREAT) + flock(LOCK_SH | LOCK_EX), retried on EINTR; released by closing the file.
// The lock file's content is never read or written.
#include "images/store_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

#include "images/error.h"

namespace capsule::images {

StoreLock::StoreLock(const std::filesystem::path& file, Mode mode) {
  fd_.reset(open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd_) throw_image_errno("lock", file.string(), "open lock file");
  const int operation = mode == Mode::kShared ? LOCK_SH : LOCK_EX;
  while (flock(fd_.get(), operation) != 0) {
    if (errno != EINTR) throw_image_errno("lock", file.string(), "flock");
  }
}

}  // namespace capsule::images

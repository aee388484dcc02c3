// Disk promises against free space: free (statvfs, as unprivileged writers see it) minus the reserve minus what
// each live disk may still take (its size less the blocks its image already holds) is what a new disk may have.
#include "sandbox/disk_budget.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandbox/error.h"

namespace capsule::sandbox {

struct DiskClaim::Shared {
  std::string dir;
  std::uint64_t reserve_bytes = 0;
  mutable std::mutex mutex;
  DiskClaim* first = nullptr;  // live claims, a list threaded through them (no allocation per claim)
};

DiskClaim::~DiskClaim() {
  std::lock_guard lock(shared_->mutex);
  if (previous_ != nullptr) previous_->next_ = next_;
  else shared_->first = next_;
  if (next_ != nullptr) next_->previous_ = previous_;
}

void DiskClaim::attach(int image_fd) {
  base::UniqueFd copy(fcntl(image_fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) throw_errno("disk", shared_->dir, "dup of a disk image's descriptor");
  std::lock_guard lock(shared_->mutex);
  image_ = std::move(copy);
}

std::uint64_t DiskClaim::outstanding() const {
  struct stat st {};
  if (!image_ || fstat(image_.get(), &st) != 0) return bytes_;
  const std::uint64_t held = static_cast<std::uint64_t>(st.st_blocks) * 512;
  return held >= bytes_ ? 0 : bytes_ - held;
}

DiskBudget::DiskBudget(std::string dir, std::uint64_t reserve_bytes) : shared_(std::make_shared<DiskClaim::Shared>()) {
  shared_->dir = std::move(dir);
  shared_->reserve_bytes = reserve_bytes;
}

DiskBudget::~DiskBudget() = default;  // claims still alive keep the shared state (and unlink from it) themselves

std::optional<std::string> DiskBudget::shortfall_locked(std::uint64_t bytes, std::uint64_t headroom) const {
  const DiskClaim::Shared& shared = *shared_;
  if (shared.dir.empty()) return std::nullopt;
  struct statvfs fs {};
  // The dir itself may not exist yet (the launcher makes it with its first box): the filesystem it will be on.
  std::string on = shared.dir;
  while (statvfs(on.c_str(), &fs) != 0) {
    const std::size_t slash = on.rfind('/');
    if (errno != ENOENT || slash == std::string::npos || on == "/") {
      return "cannot query the free space of " + shared.dir + " for a sandbox disk: " + std::strerror(errno);
    }
    on = slash == 0 ? "/" : on.substr(0, slash);
  }
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  std::uint64_t promised = 0;
  for (const DiskClaim* claim = shared.first; claim != nullptr; claim = claim->next_) promised += claim->outstanding();
  const std::uint64_t wanted = bytes + headroom;
  if (free_bytes >= shared.reserve_bytes && free_bytes - shared.reserve_bytes >= promised &&
      free_bytes - shared.reserve_bytes - promised >= wanted) {
    return std::nullopt;
  }
  return "a sandbox disk of " + std::to_string(bytes) + " bytes does not fit on the state filesystem (" + shared.dir +
         "): " + std::to_string(free_bytes) + " bytes free, " + std::to_string(shared.reserve_bytes) +
         " kept free (min_free_bytes), " + std::to_string(promised) +
         " still promised to live sandboxes' disks; ask for a smaller limits.disk or retry later";
}

std::optional<std::string> DiskBudget::shortfall(std::uint64_t bytes, std::uint64_t headroom) const {
  std::lock_guard lock(shared_->mutex);
  return shortfall_locked(bytes, headroom);
}

const std::string& DiskBudget::dir() const { return shared_->dir; }

std::unique_ptr<DiskClaim> DiskBudget::claim(std::uint64_t bytes, std::uint64_t headroom) {
  std::lock_guard lock(shared_->mutex);
  if (auto lacking = shortfall_locked(bytes, headroom)) {
    throw SandboxError(base::Cause{"disk", shared_->dir, ENOSPC, *lacking}, "insufficient_storage", *lacking);
  }
  std::unique_ptr<DiskClaim> made(new DiskClaim(shared_, bytes));
  made->next_ = shared_->first;
  if (shared_->first != nullptr) shared_->first->previous_ = made.get();
  shared_->first = made.get();
  return made;
}

}  // namespace capsule::sandbox

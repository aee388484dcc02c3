// DiskBudget: the space a launcher's sandbox disks were promised, held against the free space of the filesystem
// their sparse images live on, so that boxes are never promised together more than the host can store.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "base/unique_fd.h"

namespace capsule::sandbox {

class DiskBudget;

// One disk's promise, returned to its budget when destroyed: its full size until its image is attached, then
// what of it the image has not yet taken from the filesystem (what the box writes moves from one to the other).
class DiskClaim {
 public:
  ~DiskClaim();
  DiskClaim(const DiskClaim&) = delete;
  DiskClaim& operator=(const DiskClaim&) = delete;
  // From now on the image behind `image_fd` (a copy of the descriptor is kept) counts what it holds.
  void attach(int image_fd);
  std::uint64_t bytes() const { return bytes_; }

 private:
  friend class DiskBudget;
  struct Shared;
  DiskClaim(std::shared_ptr<Shared> shared, std::uint64_t bytes) : shared_(std::move(shared)), bytes_(bytes) {}
  std::uint64_t outstanding() const;  // under Shared::mutex

  std::shared_ptr<Shared> shared_;
  std::uint64_t bytes_;
  base::UniqueFd image_;
  DiskClaim* next_ = nullptr;  // the budget's list of live claims
  DiskClaim* previous_ = nullptr;
};

class DiskBudget {
 public:
  // Images go to `dir`; `reserve_bytes` of its filesystem stay free for everything else (capsuled: its
  // min_free_bytes, for the ledger, logs and snapshots). An empty dir: no accounting, every claim fits.
  DiskBudget(std::string dir, std::uint64_t reserve_bytes);
  ~DiskBudget();
  DiskBudget(const DiskBudget&) = delete;
  DiskBudget& operator=(const DiskBudget&) = delete;

  // What `bytes` more, with `headroom` still free after them, would lack now: a message naming the free space,
  // the reserve and what live disks were promised; nothing when they fit.
  std::optional<std::string> shortfall(std::uint64_t bytes, std::uint64_t headroom = 0) const;
  // Claims `bytes` if shortfall(bytes, headroom) is empty, atomically with the check; else throws SandboxError
  // with code "insufficient_storage" (HTTP 507) and that message.
  std::unique_ptr<DiskClaim> claim(std::uint64_t bytes, std::uint64_t headroom = 0);
  const std::string& dir() const;

 private:
  std::optional<std::string> shortfall_locked(std::uint64_t bytes, std::uint64_t headroom) const;
  std::shared_ptr<DiskClaim::Shared> shared_;
};

}  // namespace capsule::sandbox

// DiskGuard: the free-space watermark of capsuled's state filesystem. Below it new runs are refused (507
// insufficient_storage) so running ones, the ledger and the logs keep room to finish.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace capsule::daemon {

struct StorageWatermark {
  std::uint64_t min_free_bytes = 1ull << 30;  // blocks available to unprivileged writers (statvfs f_bavail)
  std::uint64_t min_free_inodes = 10000;      // inodes available (f_favail)
};

// What `dir`'s filesystem has free, against the watermark: a message naming what is short, or nothing
// when both are above it. A filesystem that cannot be queried counts as short (its errno in the message).
std::optional<std::string> storage_shortage(const std::string& dir, const StorageWatermark& watermark);

// For submission: throws ApiError("insufficient_storage", message) when storage_shortage() says so.
// RunManager::submit (or the POST /v1/runs handler) calls it with the state dir before accepting a run.
void require_storage(const std::string& dir, const StorageWatermark& watermark);

}  // namespace capsule::daemon

// The free-space watermark check: one statvfs per submission, no cache (a filling disk must be seen at
// once), and a message an operator can act on (what is free, what is required, where).
#include "daemon/runs/disk_guard.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "http/response.h"

namespace capsule::daemon {

std::optional<std::string> storage_shortage(const std::string& dir, const StorageWatermark& watermark) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) {
    return "cannot query free space of " + dir + ": " + std::strerror(errno);
  }
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes < watermark.min_free_bytes) {
    return "the state filesystem (" + dir + ") has " + std::to_string(free_bytes) + " bytes free, below the " +
           std::to_string(watermark.min_free_bytes) + " (min_free_bytes) new runs need";
  }
  // Filesystems without an inode count (f_files == 0, e.g. btrfs) report no inode shortage.
  if (fs.f_files != 0 && fs.f_favail < watermark.min_free_inodes) {
    return "the state filesystem (" + dir + ") has " + std::to_string(fs.f_favail) + " inodes free, below the " +
           std::to_string(watermark.min_free_inodes) + " (min_free_inodes) new runs need";
  }
  return std::nullopt;
}

void require_storage(const std::string& dir, const StorageWatermark& watermark) {
  if (auto shortage = storage_shortage(dir, watermark)) throw http::ApiError("insufficient_storage", *shortage);
}

}  // namespace capsule::daemon

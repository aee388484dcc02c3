// What one snapshot may hold (files, bytes, path length, depth) and the check of a source tar against it, before
// anything is unpacked: an over-limit source is refused with 413 snapshot_too_large naming the limit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace capsule::daemon {

struct SnapshotLimits {
  std::uint64_t max_files = 1'000'000;    // entries: regular files, directories and symlinks
  std::uint64_t max_bytes = 16ull << 30;  // the sum of the regular files' sizes
  std::size_t max_path = 4096;            // bytes of one entry's path
  std::size_t max_depth = 256;            // components of one entry's path

  // Bytes of a tar holding at most max_files entries and max_bytes of data (headers, long names, padding): the
  // most a source tool may write before it is stopped.
  std::uint64_t max_tar_bytes() const { return max_bytes + (max_files + 16) * 4096; }
};

// Reads every header of `tar` (plain or compressed) and refuses, with http::ApiError, what a snapshot cannot
// hold: 413 snapshot_too_large naming the limit; 400 invalid_archive naming the path for device nodes, fifos and
// sockets, names starting with ".wh." (overlayfs whiteouts), absolute paths and ".." components. Hard links are
// checked by the unpacker (images/layer_unpack.h: inside the tree, to regular files only).
void check_source_tar(const std::filesystem::path& tar, const SnapshotLimits& limits);

}  // namespace capsule::daemon

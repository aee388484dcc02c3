// Unpacks one OCI layer (tar, tar+gzip, tar+zstd) into a directory used as an overlayfs lower layer:
// OCI whiteouts become overlayfs whiteouts, hostile entries are refused, and a failed unpack leaves nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "store/digest.h"

namespace capsule::images {

struct UnpackLimits {
  std::uint64_t max_file_bytes = 8ull << 30;     // one regular file
  std::uint64_t max_total_bytes = 32ull << 30;   // the whole uncompressed tar stream
  double max_ratio = 100;                        // uncompressed : compressed bytes (zip-bomb guard) ...
  std::uint64_t ratio_floor_bytes = 1ull << 30;  // ... enforced only once this much has been unpacked
  std::uint64_t max_entries = 10'000'000;        // tar entries
  bool sync = true;                              // false: no syncfs before the rename (scratch trees)
  // Every entry's mtime and atime (and the target's own), in seconds since the epoch, instead of the archive's
  // (snapshot trees, whose canonical tars say 0). Unset: the archive's.
  std::optional<std::int64_t> mtime;
};

struct UnpackResult {
  store::Digest diff_id;                   // sha256 of the uncompressed tar stream
  std::uint64_t unpacked_bytes = 0; // uncompressed tar stream size
  std::uint64_t entries = 0;
};

// Unpacks `blob` into `target`, which must not exist (its parent must). Work happens in a temporary sibling
// renamed into place once complete, so on any error nothing is left. What lands on disk:
//  - regular files, directories, symlinks (never followed), hard links to regular files of the same layer;
//    numeric uid/gid, mode bits including setuid/setgid/sticky, mtimes (or limits.mtime) and xattrs from the archive;
//  - `.wh.NAME` becomes a 0:0 character device NAME (an overlayfs whiteout); `.wh..wh..opq` marks its
//    directory opaque with trusted.overlay.opaque=y and user.overlay.opaque=y (the latter for overlays mounted
//    with `userxattr` in a user namespace); other `.wh..wh.*` (aufs metadata) entries are skipped.
// Refused with ImageError{step "unpack"}: absolute paths, `..` components, entries whose parent path goes
// through a symlink, hard links leaving the layer or to non-regular files, device nodes, fifos and sockets,
// overlayfs xattrs set by the archive, and anything above `limits`. With expected_diff_id, a layer whose
// uncompressed stream hashes differently is refused too.
UnpackResult unpack_layer(const std::filesystem::path& blob, const std::filesystem::path& target,
                          const UnpackLimits& limits = {}, const std::optional<store::Digest>& expected_diff_id = {});

}  // namespace capsule::images

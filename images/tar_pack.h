// Deterministic tar (optionally gzip) of a directory with libarchive: sorted entries, clamped mtimes,
// numeric owners without names, no atime/ctime — the same tree always gives the same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "images/error.h"
#include "store/digest.h"

namespace capsule::images {

struct PackOptions {
  std::int64_t epoch = 0;    // mtimes later than this are clamped to it (SOURCE_DATE_EPOCH style)
  bool gzip = true;          // gzip without name or timestamp in its header
  bool zero_owners = false;  // record every entry as 0:0 (for archives of generated files)
  bool xattrs = true;        // false: no xattrs at all (snapshots: only contents, modes and link targets count)
  // An overlayfs upper dir packed as an OCI layer: whiteouts (character devices 0/0) become empty ".wh.<name>"
  // entries and opaque directories (trusted. or user.overlay.opaque = "y") get a ".wh..wh..opq" entry.
  bool overlay_upper = false;
  // Owners as a user namespace shows them: host ids in [id_base, id_base + id_count) become id - id_base, any
  // other id 65534 (nobody). id_count 0: ids as they are.
  std::uint32_t id_base = 0;
  std::uint32_t id_count = 0;
  // When set, only entries it accepts are packed; a directory it refuses is not descended into.
  std::function<bool(const std::string& path, bool is_dir)> include{};
  // Directories packed in place of what the walk finds at a path ("root/.m2" -> a host dir that was bound
  // there): the walk's own entry for that directory is kept, its contents come from the host dir instead.
  std::map<std::string, std::filesystem::path> grafts{};
  // Tar bytes allowed. A first walk adds up every entry's header and size without reading any data, and a tree
  // past the cap throws TarTooLarge before a byte is read (a sandbox's sparse files, one of 60 GiB or a
  // thousand of 63 MiB, must not make the daemon read and write their zeros). 0: no cap.
  std::uint64_t max_tar_bytes = 0;
};

// A file that would take the tar past PackOptions::max_tar_bytes.
class TarTooLarge : public ImageError {
 public:
  using ImageError::ImageError;
};

struct PackResult {
  store::Digest diff_id;                     // sha256 of the uncompressed tar
  std::uint64_t tar_bytes = 0;        // uncompressed tar size
  std::uint64_t entries = 0;
  std::vector<std::string> skipped;   // device nodes, fifos and sockets: never packed
};

using ByteSink = std::function<void(const void* data, std::size_t size)>;

// Writes the tar of everything below `dir` (not `dir` itself) to `sink`, paths relative ("etc/passwd").
// Order: each directory's entries sorted bytewise, a directory before its contents. Regular files, dirs,
// symlinks and hard links (by inode) are packed with their mode bits, numeric uid/gid and xattrs (except
// security.selinux and overlayfs ones); mount points below `dir` are packed as empty directories.
// Throws ImageError{step "pack"}; a file that changes size while being read is an error.
PackResult pack_directory(const std::filesystem::path& dir, const ByteSink& sink, const PackOptions& options = {});

}  // namespace capsule::images

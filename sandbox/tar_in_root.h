// Streaming tar in and out of a live sandbox's root for the session file API (GET of a directory, PUT of an
// archive): libarchive on chunk callbacks, so neither a 500 MB tree nor its archive is ever held in memory.
#pragma once

#include <limits.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sandbox/root_files.h"
#include "sandbox/userns.h"

namespace capsule::sandbox {

struct TreeCounts {
  std::uint64_t files = 0;     // regular files (and hard links)
  std::uint64_t dirs = 0;
  std::uint64_t symlinks = 0;
  std::uint64_t bytes = 0;     // file contents
  std::uint64_t skipped = 0;   // pack_tree only: FIFOs, sockets, devices, kernel filesystems, unreadable entries
};

struct PackLimits {
  std::size_t max_depth = 128;            // directories below the packed one
  std::uint64_t max_entries = 1'000'000;
};

// Writes a pax tar of `path` under the root (resolved as open_for_read does) to `sink` in 64 KiB chunks. A
// directory's entries are named relative to it ("src/a.c"; the directory itself has no entry); a regular
// file is one entry named by its last component. The walk goes by descriptors (openat O_PATH | O_NOFOLLOW
// of one name at a time, type from fstat of that descriptor): symlinks are stored as symlinks and never
// followed, hard links are stored as separate files, FIFOs, sockets and devices are skipped, and so are entries
// the calling thread may not read (EACCES) and what is on a kernel filesystem (a mounted /proc, /sys); other
// mounts (the workspace) are crossed. Modes without setuid and setgid (a tar out of a box carries no privilege
// to whoever unpacks it), mtimes (seconds) and numeric owners, no names, are kept: with `owners` set, as the box
// sees them (host ids in [host_base, host_base + count) as id - host_base, so sandbox root is 0:0; any other
// 65534, nobody), as a kept run layer names them (images/tar_pack.h); count 0: host ids as they are. Past a limit
// throws "payload_too_large"; other errors as root_files.h says; an exception from `sink` propagates.
TreeCounts pack_tree(int root_fd, std::string_view path, const ByteWriter& sink, const PackLimits& limits = {},
                     const IdRange& owners = {});

struct UnpackLimits {
  std::uint64_t max_bytes = 0;                  // file contents in total
  std::uint64_t max_entries = 1'000'000;
  std::size_t max_path_length = PATH_MAX - 1;   // an entry's name or symlink target
};

// Reads a tar (ustar, pax or GNU; not compressed) from `source` chunk by chunk and creates its entries under
// the directory `dest_path` (created as make_dirs does) with the *_beneath primitives: no entry ever goes
// through a symlink, whether it was there before or an earlier entry made it ("not_a_file"). Regular files,
// directories, symlinks (targets stored as they are) and hard links to names under dest are created, owned by
// `owner`, with mode & 0777 and, for files, the archive's mtime; missing parents get 0755. An absolute name,
// a ".." component or an over-long name throws "invalid_path"; a device, FIFO or other entry type and a
// broken archive throw "invalid_archive"; past a limit "payload_too_large". Entries made before an error
// stay (each one is complete: files appear by rename).
TreeCounts unpack_tree(int root_fd, std::string_view dest_path, const ByteReader& source, const RootOwner& owner,
                       const UnpackLimits& limits);

}  // namespace capsule::sandbox

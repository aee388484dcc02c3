// check_source_tar: a header-only pass over the source tar with the images' TarStream (plain, gzip or zstd), so
// limits and refused entry types are reported by name before any byte is written to the store.
#include "daemon/snapshots/snapshot_limits.h"

#include <archive_entry.h>

#include <algorithm>
#include <string_view>

#include "http/response.h"
#include "images/tar_stream.h"

namespace capsule::daemon {
namespace {

[[noreturn]] void too_large(const std::string& what) { throw http::ApiError("snapshot_too_large", what); }

// Components of an entry's path ("." and empty parts dropped); absolute paths, ".." and whiteout names refused.
std::size_t checked_depth(std::string_view path) {
  if (!path.empty() && path.front() == '/') {
    throw http::ApiError("invalid_archive", "'" + std::string(path) + "': absolute paths are not allowed");
  }
  std::size_t depth = 0;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part == "..") throw http::ApiError("invalid_archive", "'" + std::string(path) + "': '..' components are not allowed");
    if (part.rfind(".wh.", 0) == 0) {
      throw http::ApiError("invalid_archive", "'" + std::string(path) +
                                                  "': names starting with .wh. cannot be stored (overlayfs whiteouts)");
    }
    if (!part.empty() && part != ".") ++depth;
    start = end + 1;
  }
  return depth;
}

}  // namespace

void check_source_tar(const std::filesystem::path& tar, const SnapshotLimits& limits) {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  try {
    images::TarStream stream(tar, images::StreamLimits{limits.max_tar_bytes(), 0, 0}, "snapshot");
    for (;;) {
      struct archive_entry* entry = nullptr;
      const int status = archive_read_next_header(stream.tar(), &entry);
      if (status == ARCHIVE_EOF) break;
      if (status < ARCHIVE_WARN) stream.fail("read entry header");
      const char* raw = archive_entry_pathname(entry);
      if (raw == nullptr) raw = archive_entry_pathname_utf8(entry);
      if (raw == nullptr) throw http::ApiError("invalid_archive", "an entry has no readable path");
      const std::string_view path(raw);
      // Appended rather than "'" + std::string(path): GCC 12 at -O3 sees a false overlap there (-Wrestrict).
      if (path.size() > limits.max_path) {
        too_large(std::string(1, '\'').append(path.substr(0, 200)) + "...': a path longer than max_path (" +
                  std::to_string(limits.max_path) + " bytes)");
      }
      if (checked_depth(path) > limits.max_depth) {
        too_large(std::string(1, '\'').append(path) + "': deeper than max_depth (" +
                  std::to_string(limits.max_depth) + ")");
      }
      if (++files > limits.max_files) {
        too_large("more than max_files (" + std::to_string(limits.max_files) + ") entries");
      }
      const mode_t type = archive_entry_filetype(entry);
      if (archive_entry_hardlink(entry) == nullptr && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
        const char* kind = type == AE_IFCHR || type == AE_IFBLK ? "device nodes" : type == AE_IFIFO ? "fifos"
                           : type == AE_IFSOCK                  ? "sockets"
                                                                : "special files";
        throw http::ApiError("invalid_archive", "'" + std::string(path) + "': " + kind + " cannot be stored in a snapshot");
      }
      if (type == AE_IFREG && archive_entry_size_is_set(entry) && archive_entry_hardlink(entry) == nullptr) {
        bytes += static_cast<std::uint64_t>(std::max<la_int64_t>(archive_entry_size(entry), 0));
        if (bytes > limits.max_bytes) {
          too_large("more than max_bytes (" + std::to_string(limits.max_bytes) + ") of file contents");
        }
      }
    }
    stream.finish();
  } catch (const http::ApiError&) {
    throw;
  } catch (const base::Error& e) {
    throw http::ApiError("invalid_archive", std::string("not a readable tar: ") + e.what());
  }
}

}  // namespace capsule::daemon

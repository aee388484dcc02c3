// Small file helpers shared by images/: opens that cannot leave a directory, bounded whole-file reads,
// full writes, and atomic replace-by-rename. All failures throw base::Error naming the step and path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/unique_fd.h"

namespace capsule::base {

// Opens `relative` under the directory `dir_fd` without following any symlink and without leaving the
// directory (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), always O_NONBLOCK so that a FIFO cannot block
// the open (reads of regular files and directories ignore the flag). `shown` names the file in errors.
UniqueFd open_beneath(int dir_fd, const std::string& relative, int flags, const std::string& step,
                      const std::string& shown);

// Opens a regular file for reading: O_NONBLOCK, so a FIFO or a device named in its place cannot block the
// open, then the type is checked on the descriptor before anything is read; anything else throws base::Error.
UniqueFd open_regular_file(const std::filesystem::path& file, const std::string& step);
// Throws base::Error unless fd is a regular file (after an open that may have reached something else).
void require_regular_file(int fd, const std::string& step, const std::string& shown);

// Opens a directory (O_DIRECTORY, following symlinks: the caller named it).
UniqueFd open_directory(const std::filesystem::path& dir, const std::string& step);

// Reads the whole file behind fd; refuses files larger than max_bytes.
std::string read_fd(int fd, std::uint64_t max_bytes, const std::string& step, const std::string& shown);

void write_all(int fd, const void* data, std::size_t size, const std::string& step, const std::string& shown);

// Writes `content` to a temporary sibling, fsyncs it and renames it over `path`.
void write_file_atomic(const std::filesystem::path& path, std::string_view content, const std::string& step,
                       unsigned mode = 0644);

// A directory removed with everything in it when this goes (staging dirs of creates, saves and imports).
struct ScopedDir {
  std::filesystem::path path;
  explicit ScopedDir(std::filesystem::path dir) : path(std::move(dir)) {}
  ~ScopedDir();
  ScopedDir(const ScopedDir&) = delete;
  ScopedDir& operator=(const ScopedDir&) = delete;
};

// A fresh private (0700) directory `<parent>/<prefix>XXXXXX`.
std::filesystem::path make_temp_dir(const std::filesystem::path& parent, const std::string& prefix,
                                    const std::string& step);

// Creates `dir` (and missing parents) and sets its mode.
void make_dir(const std::filesystem::path& dir, unsigned mode, const std::string& step);

}  // namespace capsule::base

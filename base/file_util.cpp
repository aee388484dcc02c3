// Safe opens (openat2), bounded reads, full writes and atomic file replacement for the image store.
// Nothing here interprets file contents; callers parse with nlohmann/json or libarchive.
#include "base/file_util.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "base/error.h"

namespace capsule::base {

UniqueFd open_beneath(int dir_fd, const std::string& relative, int flags, const std::string& step,
                      const std::string& shown) {
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC | O_NONBLOCK);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = syscall(SYS_openat2, dir_fd, relative.c_str(), &how, sizeof how);
  if (fd < 0) {
    if (errno == ELOOP || errno == EXDEV) throw_errno(step, shown, "path leaves the directory or uses a symlink");
    throw_errno(step, shown, "open");
  }
  return UniqueFd(static_cast<int>(fd));
}

void require_regular_file(int fd, const std::string& step, const std::string& shown) {
  struct stat st {};
  if (fstat(fd, &st) != 0) throw_errno(step, shown, "stat");
  if (!S_ISREG(st.st_mode)) throw_error(step, shown, "not a regular file");
}

UniqueFd open_regular_file(const std::filesystem::path& file, const std::string& step) {
  UniqueFd fd(open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) throw_errno(step, file.string(), "open");
  require_regular_file(fd.get(), step, file.string());
  return fd;
}

UniqueFd open_directory(const std::filesystem::path& dir, const std::string& step) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(step, dir.string(), "open directory");
  return UniqueFd(fd);
}

std::string read_fd(int fd, std::uint64_t max_bytes, const std::string& step, const std::string& shown) {
  std::string data;
  char buffer[65536];
  for (;;) {
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(step, shown, "read");
    }
    if (n == 0) break;
    if (data.size() + static_cast<std::size_t>(n) > max_bytes) {
      throw_error(step, shown, "larger than " + std::to_string(max_bytes) + " bytes");
    }
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

void write_all(int fd, const void* data, std::size_t size, const std::string& step, const std::string& shown) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, bytes, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(step, shown, "write");
    }
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
}

void write_file_atomic(const std::filesystem::path& path, std::string_view content, const std::string& step,
                       unsigned mode) {
  std::string temp = path.string() + ".tmp-XXXXXX";
  int fd = mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0) throw_errno(step, path.string(), "create temporary file");
  UniqueFd owned(fd);
  try {
    write_all(fd, content.data(), content.size(), step, temp);
    if (fchmod(fd, mode) != 0) throw_errno(step, temp, "chmod");
    if (fsync(fd) != 0) throw_errno(step, temp, "fsync");
    if (rename(temp.c_str(), path.c_str()) != 0) throw_errno(step, path.string(), "rename into place");
  } catch (...) {
    unlink(temp.c_str());
    throw;
  }
}

std::filesystem::path make_temp_dir(const std::filesystem::path& parent, const std::string& prefix,
                                    const std::string& step) {
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) throw_errno(step, parent.string(), "create temporary directory");
  return pattern;
}

void make_dir(const std::filesystem::path& dir, unsigned mode, const std::string& step) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) throw base::Error(base::Cause{step, dir.string(), error.value(), "create directory"});
  if (chmod(dir.c_str(), mode) != 0) throw_errno(step, dir.string(), "chmod");
}

ScopedDir::~ScopedDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);
}

}  // namespace capsule::base

// LogReader: inflate with a fixed 64 KiB input buffer and an output bound per call; the z_stream and any
// unread input survive between calls, so reading resumes exactly where it stopped.
#include "daemon/logs/log_reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/unique_fd.h"
#include "daemon/logs/log_store.h"

namespace capsule::daemon {
namespace {

constexpr int kAutoDetectWindowBits = 15 + 32;  // zlib or gzip wrapper
constexpr std::size_t kInputBytes = 64 * 1024;
constexpr std::size_t kMaxPiece = 16u << 20;  // bounds one read() whatever the caller asks

}  // namespace

LogReader::LogReader(std::string path) : path_(std::move(path)) { open_file(); }

LogReader::~LogReader() {
  if (fd_ < 0) return;
  inflateEnd(zs_.get());
  ::close(fd_);
}

bool LogReader::open_file() {
  base::UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd && errno == ENOENT) return false;
  if (!fd) throw LogStoreError(path_, std::string("open for reading: ") + std::strerror(errno));
  auto zs = std::make_unique<z_stream>();
  if (inflateInit2(zs.get(), kAutoDetectWindowBits) != Z_OK) throw LogStoreError(path_, "inflateInit2 failed");
  zs_ = std::move(zs);
  input_.reset(new unsigned char[kInputBytes]);
  fd_ = fd.release();
  return true;
}

std::string LogReader::read(std::size_t max_bytes) {
  std::string out;
  if (finished_ || max_bytes == 0 || (fd_ < 0 && !open_file())) return out;
  out.resize(std::min(max_bytes, kMaxPiece));
  std::size_t produced = 0;
  while (produced < out.size()) {
    bool at_end_of_file = false;
    if (zs_->avail_in == 0) {
      const ssize_t n = ::read(fd_, input_.get(), kInputBytes);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw LogStoreError(path_, std::string("read: ") + std::strerror(errno));
      }
      at_end_of_file = n == 0;
      zs_->next_in = input_.get();
      zs_->avail_in = static_cast<uInt>(n);
    }
    zs_->next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs_->avail_out = static_cast<uInt>(out.size() - produced);
    const int rc = inflate(zs_.get(), Z_NO_FLUSH);
    const std::size_t made = out.size() - produced - zs_->avail_out;
    produced += made;
    if (rc == Z_STREAM_END) {
      finished_ = true;
      break;
    }
    if (rc == Z_BUF_ERROR || (rc == Z_OK && made == 0 && at_end_of_file)) break;  // no more input for now
    if (rc != Z_OK) {
      throw LogStoreError(path_, "corrupt log: " +
                          (zs_->msg != nullptr ? std::string(zs_->msg) : "inflate error " + std::to_string(rc)));
    }
  }
  out.resize(produced);
  position_ += produced;
  return out;
}

std::string read_last_lines(LogReader& reader, std::size_t lines, std::size_t max_bytes) {
  std::string window;  // the end of what was read: at least its last max_bytes bytes
  for (std::string piece = reader.read(); !piece.empty(); piece = reader.read()) {
    window += piece;
    if (window.size() > 2 * max_bytes) window.erase(0, window.size() - max_bytes);
  }
  if (lines == 0) return {};
  std::size_t start = 0;
  std::size_t found = 0;
  // A '\n' at the very end closes the last line; every other one ends the line before the one that follows it.
  for (std::size_t i = window.size() - (window.ends_with('\n') ? 1 : 0); i > 0; --i) {
    if (window[i - 1] == '\n' && ++found == lines) {
      start = i;
      break;
    }
  }
  start = std::max(start, window.size() - std::min(window.size(), max_bytes));
  return window.substr(start);
}

}  // namespace capsule::daemon

// LogStore: gzip streams written with deflate + Z_SYNC_FLUSH per append (so the file always ends on a
// byte boundary a reader can decode up to), read back with inflate that accepts an unfinished stream.
#include "daemon/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace capsule::daemon {
namespace {

constexpr int kGzipWindowBits = 15 + 16;      // deflate: gzip wrapper, 32 KiB window
constexpr int kAutoDetectWindowBits = 15 + 32;  // inflate: zlib or gzip wrapper
constexpr std::size_t kChunk = 64 * 1024;
constexpr std::size_t kMaxZlibInput = 1u << 30;  // z_stream counts in uInt

std::string errno_text() { return std::strerror(errno); }

bool valid_run_id(const std::string& id) {
  if (id.empty() || id.front() == '.') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

// Closes a descriptor when the scope ends.
struct FdGuard {
  int fd;
  ~FdGuard() { ::close(fd); }
};

}  // namespace

const char* stream_name(Stream stream) { return stream == Stream::kStdout ? "stdout" : "stderr"; }

LogWriter::LogWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)), zs_(std::make_unique<z_stream>()) {
  if (deflateInit2(zs_.get(), Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    ::close(fd_);
    throw LogStoreError(path_ + ": deflateInit2 failed");
  }
}

LogWriter::~LogWriter() {
  try {
    close();
  } catch (const LogStoreError&) {
    // Nothing to report to at destruction; close() explicitly to see errors.
  }
}

void LogWriter::append(std::string_view data) {
  if (!open_) throw LogStoreError(path_ + ": append after close");
  while (!data.empty()) {
    const std::size_t piece = std::min(data.size(), kMaxZlibInput);
    deflate_and_write(data.substr(0, piece), Z_SYNC_FLUSH);
    data.remove_prefix(piece);
  }
}

void LogWriter::close() {
  if (!open_) return;
  open_ = false;
  std::string error;
  try {
    deflate_and_write({}, Z_FINISH);
  } catch (const LogStoreError& e) {
    error = e.what();
  }
  deflateEnd(zs_.get());
  if (::close(fd_) != 0 && error.empty()) error = path_ + ": close: " + errno_text();
  if (!error.empty()) throw LogStoreError(error);
}

void LogWriter::deflate_and_write(std::string_view data, int flush) {
  unsigned char out[kChunk];
  zs_->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));  // zlib does not write input
  zs_->avail_in = static_cast<uInt>(data.size());
  int rc = Z_OK;
  do {
    zs_->next_out = out;
    zs_->avail_out = sizeof out;
    rc = deflate(zs_.get(), flush);
    if (rc == Z_STREAM_ERROR) throw LogStoreError(path_ + ": deflate: stream error");
    write_fully(out, sizeof out - zs_->avail_out);
  } while (zs_->avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

void LogWriter::write_fully(const unsigned char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw LogStoreError(path_ + ": write: " + errno_text());
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

LogStore::LogStore(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw LogStoreError(dir_ + ": create directory: " + ec.message());
}

std::string LogStore::path(const std::string& run_id, Stream stream) const {
  if (!valid_run_id(run_id)) throw LogStoreError("log store: '" + run_id + "' is not a valid run id");
  return dir_ + "/" + run_id + "." + stream_name(stream) + ".z";
}

std::unique_ptr<LogWriter> LogStore::open_writer(const std::string& run_id, Stream stream) {
  std::string file = path(run_id, stream);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) throw LogStoreError(file + ": open for writing: " + errno_text());
  if (::fchmod(fd, 0600) != 0) {  // an existing file keeps its mode through O_CREAT
    const std::string error = file + ": chmod 0600: " + errno_text();
    ::close(fd);
    throw LogStoreError(error);
  }
  return std::make_unique<LogWriter>(fd, std::move(file));
}

std::string LogStore::read_all(const std::string& run_id, Stream stream) const {
  const std::string file = path(run_id, stream);
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw LogStoreError(file + ": open for reading: " + errno_text());
  FdGuard guard{fd};

  z_stream zs{};
  if (inflateInit2(&zs, kAutoDetectWindowBits) != Z_OK) throw LogStoreError(file + ": inflateInit2 failed");
  std::string text;
  std::string error;
  unsigned char in[kChunk];
  char out[kChunk];
  bool finished = false;
  while (!finished && error.empty()) {
    const ssize_t n = ::read(fd, in, sizeof in);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = file + ": read: " + errno_text();
      break;
    }
    if (n == 0) break;  // end of file: a stream still being written ends here without a trailer
    zs.next_in = in;
    zs.avail_in = static_cast<uInt>(n);
    do {
      zs.next_out = reinterpret_cast<Bytef*>(out);
      zs.avail_out = sizeof out;
      const int rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_MEM_ERROR || rc == Z_STREAM_ERROR) {
        error = file + ": corrupt log: " + (zs.msg != nullptr ? zs.msg : "inflate error " + std::to_string(rc));
        break;
      }
      text.append(out, sizeof out - zs.avail_out);
      if (rc == Z_STREAM_END) finished = true;
    } while (!finished && zs.avail_out == 0);
  }
  inflateEnd(&zs);
  if (!error.empty()) throw LogStoreError(error);
  return text;
}

bool LogStore::exists(const std::string& run_id, Stream stream) const {
  struct stat st {};
  return ::lstat(path(run_id, stream).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void LogStore::remove(const std::string& run_id) {
  for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
    const std::string file = path(run_id, stream);
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) throw LogStoreError(file + ": unlink: " + errno_text());
  }
}

}  // namespace capsule::daemon

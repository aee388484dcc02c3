// LogStore: gzip streams written with deflate + Z_SYNC_FLUSH per append (so the file always ends on a
// byte boundary a reader can decode up to); past the cap, a ring in an unlinked temp file keeps the tail.
#include "daemon/logs/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/unique_fd.h"

namespace capsule::daemon {
namespace {

constexpr int kGzipWindowBits = 15 + 16;  // deflate: gzip wrapper, 32 KiB window
constexpr std::size_t kRingChunk = 64 * 1024;
constexpr std::size_t kMaxZlibInput = 1u << 30;  // z_stream counts in uInt
constexpr const char* kTruncationSuffix = ".truncated";

std::string errno_text() { return std::strerror(errno); }

bool valid_log_name(const std::string& id) {
  if (id.empty() || id.front() == '.') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

// An unnamed file in `dir` (O_TMPFILE), or a named one unlinked at once where O_TMPFILE is unsupported:
// nothing is left behind by a crash.
int open_anonymous_file(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string name = dir + "/.ring-XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(name.c_str());
  return fd;
}

void pwrite_fully(int fd, const char* data, std::size_t size, std::uint64_t offset, const std::string& what) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw LogStoreError(what, "write the kept tail: " + errno_text());
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

}  // namespace

const char* stream_name(Stream stream) { return stream == Stream::kStdout ? "stdout" : "stderr"; }

std::string truncation_marker(std::uint64_t dropped_bytes) {
  return "\n[capsule: log truncated, " + std::to_string(dropped_bytes) +
         " bytes dropped here; the first and the last bytes are kept]\n";
}

LogWriter::LogWriter(std::string path, std::uint64_t cap_bytes, std::shared_ptr<LogWatchers> watchers)
    : path_(std::move(path)), watchers_(std::move(watchers)) {
  if (cap_bytes > 0) {
    ring_bytes_ = std::max<std::uint64_t>(cap_bytes / 2, 1);
    head_bytes_ = std::max<std::uint64_t>(cap_bytes - cap_bytes / 2, 1);
  }
}

// O_TRUNC and fchmod: whatever is at the path (open_writer removed the earlier log, but a file may have been
// put there since) starts empty and private.
void LogWriter::create_file() {
  base::UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) throw LogStoreError(path_, "open for writing: " + errno_text());
  if (::fchmod(fd.get(), 0600) != 0) throw LogStoreError(path_, "chmod 0600: " + errno_text());
  auto zs = std::make_unique<z_stream>();
  // The fastest level: this runs on the supervision thread for every chunk of output (level 6 took ~30% of
  // the daemon's CPU while relaying; level 1 still shrinks repetitive build output many times over).
  if (deflateInit2(zs.get(), Z_BEST_SPEED, Z_DEFLATED, kGzipWindowBits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw LogStoreError(path_, "deflateInit2 failed");
  }
  zs_ = std::move(zs);
  fd_ = fd.release();
}

LogWriter::~LogWriter() {
  try {
    close();
  } catch (const LogStoreError&) {
    // Nothing to report to at destruction; close() explicitly to see errors.
  }
}

void LogWriter::append(std::string_view data) {
  if (!open_) throw LogStoreError(path_, "append after close");
  if (data.empty()) return;
  if (fd_ < 0) create_file();  // the head takes the first byte, so the file comes before any ring
  hasher_.update(data);
  std::string_view stored = data;
  if (head_bytes_ > 0) {
    const std::uint64_t room = appended_ < head_bytes_ ? head_bytes_ - appended_ : 0;
    stored = data.substr(0, static_cast<std::size_t>(std::min<std::uint64_t>(room, data.size())));
    keep_in_ring(data.substr(stored.size()));
  }
  appended_ += data.size();
  if (stored.empty()) return;
  while (!stored.empty()) {
    const std::size_t piece = std::min(stored.size(), kMaxZlibInput);
    deflate_and_write(stored.substr(0, piece), Z_SYNC_FLUSH);
    stored.remove_prefix(piece);
  }
  signal();
}

void LogWriter::keep_in_ring(std::string_view data) {
  if (data.empty()) return;
  if (ring_fd_ < 0) {
    const std::string dir = std::filesystem::path(path_).parent_path().string();
    ring_fd_ = open_anonymous_file(dir.empty() ? "." : dir);
    if (ring_fd_ < 0) throw LogStoreError(path_, "create the file keeping the tail: " + errno_text());
  }
  if (data.size() > ring_bytes_) data.remove_prefix(data.size() - ring_bytes_);  // only the last ones count
  while (!data.empty()) {
    const std::size_t piece = static_cast<std::size_t>(std::min<std::uint64_t>(data.size(), ring_bytes_ - ring_position_));
    pwrite_fully(ring_fd_, data.data(), piece, ring_position_, path_);
    data.remove_prefix(piece);
    ring_position_ = (ring_position_ + piece) % ring_bytes_;
    ring_filled_ = std::min(ring_bytes_, ring_filled_ + piece);
  }
}

// The marker (when bytes were dropped), then the ring from its oldest byte, compressed in 64 KiB pieces.
void LogWriter::write_ring_tail() {
  const std::uint64_t dropped = appended_ - head_bytes_ - ring_filled_;
  if (dropped > 0) deflate_and_write(truncation_marker(dropped), Z_NO_FLUSH);
  const std::uint64_t start = ring_filled_ < ring_bytes_ ? 0 : ring_position_;
  std::string piece(kRingChunk, '\0');
  for (std::uint64_t done = 0; done < ring_filled_;) {
    const std::uint64_t offset = (start + done) % ring_bytes_;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>({kRingChunk, ring_filled_ - done, ring_bytes_ - offset}));
    const ssize_t n = ::pread(ring_fd_, piece.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw LogStoreError(path_, "read the kept tail: " + (n < 0 ? errno_text() : "unexpected end"));
    deflate_and_write(std::string_view(piece.data(), static_cast<std::size_t>(n)), Z_NO_FLUSH);
    done += static_cast<std::uint64_t>(n);
  }
  if (dropped == 0) return;  // the log is whole: head and ring together are all it wrote
  const std::string note = nlohmann::json{{"total_bytes", appended_}, {"dropped_bytes", dropped}}.dump();
  std::ofstream file(path_ + kTruncationSuffix, std::ios::trunc);
  file << note;
  if (!file.flush()) throw LogStoreError(path_ + kTruncationSuffix, "cannot write the truncation note");
}

void LogWriter::close() {
  if (!open_) return;
  open_ = false;
  sha256_ = hasher_.finish().str();
  if (fd_ < 0) return;  // nothing was written: no file, nothing to finish
  std::optional<LogStoreError> first;  // every step runs; the first failure is the one reported
  try {
    if (ring_fd_ >= 0) write_ring_tail();
  } catch (const LogStoreError& e) {
    first = e;
  }
  try {
    deflate_and_write({}, Z_FINISH);
  } catch (const LogStoreError& e) {
    if (!first) first = e;
  }
  deflateEnd(zs_.get());
  if (ring_fd_ >= 0) ::close(ring_fd_);
  ring_fd_ = -1;
  if (::close(fd_) != 0 && !first) first = LogStoreError(path_, "close: " + errno_text());
  signal();
  if (first) throw *first;
}

void LogWriter::signal() {
  if (watchers_) watchers_->signal(path_, LogEvent::kWritten);
}

void LogWriter::deflate_and_write(std::string_view data, int flush) {
  unsigned char out[kRingChunk];
  zs_->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));  // zlib does not write input
  zs_->avail_in = static_cast<uInt>(data.size());
  int rc = Z_OK;
  do {
    zs_->next_out = out;
    zs_->avail_out = sizeof out;
    rc = deflate(zs_.get(), flush);
    if (rc == Z_STREAM_ERROR) throw LogStoreError(path_, "deflate: stream error");
    write_fully(out, sizeof out - zs_->avail_out);
  } while (zs_->avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
}

void LogWriter::write_fully(const unsigned char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw LogStoreError(path_, "write: " + errno_text());
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

LogStore::LogStore(std::string dir, LogStoreOptions options) : dir_(std::move(dir)), options_(options) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw LogStoreError(dir_, "create directory: " + ec.message());
}

std::string LogStore::path(const std::string& run_id, Stream stream) const {
  if (!valid_log_name(run_id)) throw LogStoreError("", "'" + run_id + "' is not a valid run id");
  return dir_ + "/" + run_id + "." + stream_name(stream) + ".z";
}

std::unique_ptr<LogWriter> LogStore::open_writer(const std::string& run_id, Stream stream) {
  std::string file = path(run_id, stream);
  for (const std::string& name : {file, file + kTruncationSuffix}) {  // they no longer apply
    if (::unlink(name.c_str()) != 0 && errno != ENOENT) throw LogStoreError(name, "unlink: " + errno_text());
  }
  return std::make_unique<LogWriter>(std::move(file), options_.cap_bytes, watchers_);
}

std::unique_ptr<LogReader> LogStore::open_reader(const std::string& run_id, Stream stream) const {
  return std::make_unique<LogReader>(path(run_id, stream));
}

std::string LogStore::read_all(const std::string& run_id, Stream stream) const {
  LogReader reader(path(run_id, stream));
  std::string text;
  for (std::string piece = reader.read(); !piece.empty(); piece = reader.read()) text += piece;
  return text;
}

bool LogStore::exists(const std::string& run_id, Stream stream) const {
  struct stat st {};
  return ::lstat(path(run_id, stream).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<LogTruncation> LogStore::truncation(const std::string& run_id, Stream stream) const {
  std::ifstream file(path(run_id, stream) + kTruncationSuffix);
  if (!file) return std::nullopt;
  const nlohmann::json note = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (!note.is_object()) return std::nullopt;
  return LogTruncation{note.value("total_bytes", std::uint64_t{0}), note.value("dropped_bytes", std::uint64_t{0})};
}

std::uint64_t LogStore::disk_bytes(const std::string& run_id) const {
  std::uint64_t total = 0;
  for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
    const std::string file = path(run_id, stream);
    for (const std::string& name : {file, file + kTruncationSuffix}) {
      struct stat st {};
      if (::lstat(name.c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<std::uint64_t>(st.st_size);
    }
  }
  return total;
}

void LogStore::remove(const std::string& run_id) {
  for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
    const std::string file = path(run_id, stream);
    for (const std::string& name : {file, file + kTruncationSuffix}) {
      if (::unlink(name.c_str()) != 0 && errno != ENOENT) throw LogStoreError(name, "unlink: " + errno_text());
    }
  }
}

std::unique_ptr<LogWatchers::Subscription> LogStore::watch(const std::string& run_id, Stream stream,
                                                           LogWatchers::Callback callback) {
  return watchers_->subscribe(path(run_id, stream), std::move(callback));
}

void LogStore::run_ended(const std::string& run_id) noexcept {
  if (!valid_log_name(run_id)) return;
  for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
    try {
      watchers_->signal(path(run_id, stream), LogEvent::kRunEnded);
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): a callback only posts; nothing to undo
    }
  }
}

}  // namespace capsule::daemon

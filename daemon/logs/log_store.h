// LogStore: the full stdout/stderr of every run, gzip-compressed on disk as <dir>/<run_id>.<stream>.z, created
// at the first byte (a stream that printed nothing has no file and reads as empty), capped per stream (head +
// tail), readable in pieces and followable while written.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "store/digest.h"
#include "daemon/logs/log_reader.h"
#include "daemon/logs/log_watchers.h"

struct z_stream_s;  // zlib's z_stream

namespace capsule::daemon {

// An I/O or zlib failure naming the file (cause().path), or a run id that cannot name a log file: a base::Error
// with step "log"; what() reads "log <file>: <detail>".
class LogStoreError : public base::Error {
 public:
  LogStoreError(std::string path, std::string detail)
      : base::Error(base::Cause{"log", std::move(path), 0, std::move(detail)}) {}
};

enum class Stream { kStdout, kStderr };

// "stdout" or "stderr".
const char* stream_name(Stream stream);

// What a stream carried, whole: the sha256 ("sha256:<hex>") of every byte the command wrote to it, including
// the bytes a capped log dropped, and how many bytes that was.
struct StreamDigest {
  std::string sha256;
  std::uint64_t bytes = 0;
};

// The line a capped log holds between its head and its tail.
std::string truncation_marker(std::uint64_t dropped_bytes);

// Appends to one compressed log. The file (mode 0600) and the deflate state are made at the first non-empty
// append, so a stream that stays silent costs no file, inode or zlib memory, and its log reads as empty.
// Each append is flushed (Z_SYNC_FLUSH) and written to the file before it returns, so a reader sees every
// byte appended so far. With a cap, the first cap/2 bytes are stored as they come; later bytes go to a ring
// (an unlinked temp file of cap/2 bytes, so the daemon's memory stays small) whose content follows a
// truncation_marker() at close. One thread at a time.
class LogWriter {
 public:
  // The log at `path`, not created yet. cap_bytes 0: no cap. `watchers` (optional) are signalled under the
  // key `path` (LogEvent::kWritten) after every append that reached the file, and at the close of a file.
  LogWriter(std::string path, std::uint64_t cap_bytes = 0, std::shared_ptr<LogWatchers> watchers = nullptr);
  ~LogWriter();  // closes; errors at this point are dropped (call close() to see them)
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  void append(std::string_view data);
  // Writes the kept tail after the marker (when the cap was passed), finishes the stream (gzip trailer),
  // writes the truncation note (LogStore::truncation) and closes the file; with no file, only ends the
  // writer. Idempotent.
  void close();

  const std::string& path() const { return path_; }
  std::uint64_t bytes_appended() const { return appended_; }
  // Every byte appended (those past the cap too), hashed as they came; once closed (an empty sha256 before).
  StreamDigest digest() const { return {sha256_, appended_}; }

 private:
  void create_file();
  void deflate_and_write(std::string_view data, int flush);
  void write_fully(const unsigned char* data, std::size_t size);
  void keep_in_ring(std::string_view data);
  void write_ring_tail();
  void signal();

  int fd_ = -1;                    // opened at the first byte
  std::string path_;
  std::unique_ptr<z_stream_s> zs_;  // made with the file
  bool open_ = true;
  std::shared_ptr<LogWatchers> watchers_;
  std::uint64_t head_bytes_ = 0;  // 0: no cap
  std::uint64_t ring_bytes_ = 0;
  std::uint64_t appended_ = 0;
  int ring_fd_ = -1;               // opened at the first byte past the head
  std::uint64_t ring_position_ = 0;  // next write offset in the ring
  std::uint64_t ring_filled_ = 0;
  store::Sha256 hasher_;           // over every byte appended, stored or dropped
  std::string sha256_;             // hasher_'s result, set at close
};

// How a capped log was cut: bytes the run wrote, and bytes left out between head and tail.
struct LogTruncation {
  std::uint64_t total_bytes = 0;
  std::uint64_t dropped_bytes = 0;
};

struct LogStoreOptions {
  std::uint64_t cap_bytes = 64ull << 20;  // per stream, decompressed; 0: no cap
};

class LogStore {
 public:
  // Creates `dir` (and its parents) if missing.
  explicit LogStore(std::string dir, LogStoreOptions options = {});

  // <dir>/<run_id>.stdout.z; throws LogStoreError if run_id is empty, starts with '.' or has characters
  // other than [A-Za-z0-9._-] (ids come from API paths, so this keeps them inside dir).
  std::string path(const std::string& run_id, Stream stream) const;
  // A writer with the store's cap that starts the log over: an earlier log of this run and stream (and its
  // truncation note) is removed now; the new file is created at the first byte (LogWriter).
  std::unique_ptr<LogWriter> open_writer(const std::string& run_id, Stream stream);
  // A reader from the start of the log; a log with no file (never written, or not yet) reads as empty until
  // its file appears. Throws LogStoreError only for a bad run id.
  std::unique_ptr<LogReader> open_reader(const std::string& run_id, Stream stream) const;
  // The decompressed log (for small logs and tests: the API streams with open_reader); a stream still being
  // written yields everything flushed so far, one never written "". Throws LogStoreError if unreadable or
  // corrupt.
  std::string read_all(const std::string& run_id, Stream stream) const;
  // The log has a file: at least one byte was written to it.
  bool exists(const std::string& run_id, Stream stream) const;
  // Set once a capped log was closed with bytes dropped.
  std::optional<LogTruncation> truncation(const std::string& run_id, Stream stream) const;
  // Bytes on disk for the run's logs (both streams and their notes).
  std::uint64_t disk_bytes(const std::string& run_id) const;
  // Removes both logs of a run and their notes; absent files are fine.
  void remove(const std::string& run_id);

  // Calls `callback` (on the writer's thread) with kWritten whenever the log's file grows or is closed, and
  // with kRunEnded (on the thread that recorded it) once the run is recorded as finished (run_ended()).
  std::unique_ptr<LogWatchers::Subscription> watch(const std::string& run_id, Stream stream,
                                                   LogWatchers::Callback callback);
  // The run's final state is recorded, so its logs are whole (they are closed before): tells both streams'
  // watchers (LogEvent::kRunEnded). An id that cannot name a log is ignored. Never throws.
  void run_ended(const std::string& run_id) noexcept;

  const std::string& dir() const { return dir_; }
  const LogStoreOptions& options() const { return options_; }

 private:
  std::string dir_;
  LogStoreOptions options_;
  std::shared_ptr<LogWatchers> watchers_ = std::make_shared<LogWatchers>();
};

}  // namespace capsule::daemon

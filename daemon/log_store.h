// LogStore: the full stdout/stderr of every run, gzip-compressed on disk as <dir>/<run_id>.<stream>.z,
// written incrementally and readable (up to the last append) while the run is still writing.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

struct z_stream_s;  // zlib's z_stream

namespace capsule::daemon {

// An I/O or zlib failure, naming the file; or a run id that cannot name a log file.
class LogStoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Stream { kStdout, kStderr };

// "stdout" or "stderr".
const char* stream_name(Stream stream);

// Appends to one compressed log. Each append is flushed (Z_SYNC_FLUSH) and written to the file before it
// returns, so a reader sees every byte appended so far. One thread at a time.
class LogWriter {
 public:
  // Takes ownership of `fd`, an empty file opened for writing.
  LogWriter(int fd, std::string path);
  ~LogWriter();  // closes; errors at this point are dropped (call close() to see them)
  LogWriter(const LogWriter&) = delete;
  LogWriter& operator=(const LogWriter&) = delete;

  void append(std::string_view data);
  // Finishes the stream (gzip trailer) and closes the file. Idempotent.
  void close();

  const std::string& path() const { return path_; }

 private:
  void deflate_and_write(std::string_view data, int flush);
  void write_fully(const unsigned char* data, std::size_t size);

  int fd_;
  std::string path_;
  std::unique_ptr<z_stream_s> zs_;
  bool open_ = true;
};

class LogStore {
 public:
  // Creates `dir` (and its parents) if missing.
  explicit LogStore(std::string dir);

  // <dir>/<run_id>.stdout.z; throws LogStoreError if run_id is empty, starts with '.' or has characters
  // other than [A-Za-z0-9._-] (ids come from API paths, so this keeps them inside dir).
  std::string path(const std::string& run_id, Stream stream) const;
  // Creates (or truncates) the file, mode 0600.
  std::unique_ptr<LogWriter> open_writer(const std::string& run_id, Stream stream);
  // The decompressed log; a stream still being written yields everything flushed so far.
  // Throws LogStoreError if the file is absent, unreadable or corrupt.
  std::string read_all(const std::string& run_id, Stream stream) const;
  bool exists(const std::string& run_id, Stream stream) const;
  // Removes both logs of a run; absent files are fine.
  void remove(const std::string& run_id);

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace capsule::daemon

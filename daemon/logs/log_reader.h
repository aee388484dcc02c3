// LogReader: reads one stored log (gzip) back in bounded pieces, keeping the inflate state between calls, so
// a huge log is streamed with constant memory and a log still being written is followed from where it was.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

struct z_stream_s;

namespace capsule::daemon {

class LogReader {
 public:
  static constexpr std::size_t kDefaultPiece = 64 * 1024;

  // Opens `path`; throws LogStoreError if it cannot be opened.
  explicit LogReader(std::string path);
  ~LogReader();
  LogReader(const LogReader&) = delete;
  LogReader& operator=(const LogReader&) = delete;

  // Up to `max_bytes` (>0) of the decompressed text that follows what earlier calls returned. Empty when
  // nothing more can be decoded now: the stream ended (finished()), or the file holds no more yet (a log
  // still being written, or one cut short). Throws LogStoreError naming the file for a read error or
  // corrupt data.
  std::string read(std::size_t max_bytes = kDefaultPiece);
  // The gzip trailer was reached: the writer closed the log and nothing will follow.
  bool finished() const { return finished_; }
  // Decompressed bytes returned so far.
  std::uint64_t position() const { return position_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::unique_ptr<z_stream_s> zs_;
  std::unique_ptr<unsigned char[]> input_;
  bool finished_ = false;
  std::uint64_t position_ = 0;
};

}  // namespace capsule::daemon

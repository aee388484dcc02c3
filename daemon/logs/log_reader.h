// LogReader: reads one stored log (gzip) back in bounded pieces, keeping the inflate state between calls, so
// a huge log is streamed with constant memory and a log still being written is followed from where it was.
// A log with no file (nothing written yet, or ever) reads as empty until its file appears.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

struct z_stream_s;

namespace capsule::daemon {

class LogReader {
 public:
  static constexpr std::size_t kDefaultPiece = 64 * 1024;

  // Opens `path` if it exists (else at a later read()); throws LogStoreError if it cannot be opened.
  explicit LogReader(std::string path);
  ~LogReader();
  LogReader(const LogReader&) = delete;
  LogReader& operator=(const LogReader&) = delete;

  // Up to `max_bytes` (>0) of the decompressed text that follows what earlier calls returned. Empty when
  // nothing more can be decoded now: the stream ended (finished()), or the file holds no more yet (a log
  // still being written, one cut short, or no file). Throws LogStoreError naming the file for an open or
  // read error or corrupt data.
  std::string read(std::size_t max_bytes = kDefaultPiece);
  // The gzip trailer was reached: the writer closed the log and nothing will follow.
  bool finished() const { return finished_; }
  // Decompressed bytes returned so far.
  std::uint64_t position() const { return position_; }
  const std::string& path() const { return path_; }

 private:
  // False while there is no file at path_.
  bool open_file();

  std::string path_;
  int fd_ = -1;
  std::unique_ptr<z_stream_s> zs_;  // with the file
  std::unique_ptr<unsigned char[]> input_;
  bool finished_ = false;
  std::uint64_t position_ = 0;
};

// The last `lines` lines of what `reader` still has to give now (read to its current end, holding at most about
// 2 * max_bytes at a time), at most `max_bytes` of them: when those lines are longer, their last max_bytes bytes.
// A line ends with '\n'; text after the last '\n' is a line too. Throws as LogReader::read().
std::string read_last_lines(LogReader& reader, std::size_t lines, std::size_t max_bytes);

}  // namespace capsule::daemon

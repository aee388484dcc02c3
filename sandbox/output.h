// OutputCapture: keeps the head and tail of one output stream under a byte cap, counts every byte,
// and optionally spills the whole stream to a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/result.h"

namespace capsule::sandbox {

class OutputCapture {
 public:
  // cap_bytes is split between head and tail (head gets the first half, tail the last cap - half bytes).
  // The tail is always the end of the stream; when nothing was dropped the head is the whole stream.
  // spill_path non-empty: the file is created (0600, truncated) and receives every byte; throws SandboxError.
  OutputCapture(std::uint64_t cap_bytes, std::string spill_path);
  ~OutputCapture();
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;

  void append(std::string_view bytes);
  // Flushes and closes the spill file; returns the capture. Call once.
  StreamCapture finish();

 private:
  std::uint64_t head_cap_;
  std::uint64_t tail_cap_;
  std::uint64_t total_ = 0;
  std::string head_;
  std::string tail_ring_;   // ring buffer of the last tail_cap_ bytes past the head
  std::uint64_t tail_pos_ = 0;  // once the ring is full: oldest byte and next write position
  std::string spill_path_;
  int spill_fd_ = -1;
  bool finished_ = false;

  // Writes all of bytes to the spill file, retrying partial writes and EINTR.
  void write_spill(std::string_view bytes);
};

// The last max_lines lines of `tail` (the end of a stream), without their '\n', oldest first; only its last
// max_bytes are looked at, so the first line may start mid-line (as it may when the stream was truncated).
std::vector<std::string> last_lines(std::string_view tail, std::size_t max_lines, std::size_t max_bytes);

}  // namespace capsule::sandbox

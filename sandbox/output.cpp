// OutputCapture: bounded head/tail capture of one sandboxed output stream with an optional spill file.
// The tail is a fixed-size ring, so every appended byte is copied at most once (linear in stream size).
#include "sandbox/output.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "sandbox/error.h"

namespace capsule::sandbox {

namespace {

constexpr const char* kOutputStep = "output";

}  // namespace

OutputCapture::OutputCapture(std::uint64_t cap_bytes, std::string spill_path)
    : head_cap_(cap_bytes / 2), tail_cap_(cap_bytes - cap_bytes / 2), spill_path_(std::move(spill_path)) {
  if (spill_path_.empty()) return;
  spill_fd_ = ::open(spill_path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (spill_fd_ < 0) throw_errno(kOutputStep, spill_path_, "creating spill file");
  // O_CREAT's mode only applies to new files; force 0600 on a pre-existing one too.
  if (::fchmod(spill_fd_, 0600) != 0) {
    const int saved = errno;
    ::close(spill_fd_);
    spill_fd_ = -1;
    errno = saved;
    throw_errno(kOutputStep, spill_path_, "setting spill file mode");
  }
}

OutputCapture::~OutputCapture() {
  if (spill_fd_ >= 0) ::close(spill_fd_);
}

void OutputCapture::append(std::string_view bytes) {
  if (finished_) throw_error(kOutputStep, spill_path_, "append after finish");
  if (bytes.empty()) return;

  if (spill_fd_ >= 0) write_spill(bytes);
  total_ += bytes.size();

  // Head: the first head_cap_ bytes of the stream.
  if (head_.size() < head_cap_) {
    const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(head_cap_ - head_.size(), bytes.size()));
    head_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
  }
  if (bytes.empty() || tail_cap_ == 0) return;

  // Tail: while the ring is not full yet it simply grows; tail_pos_ stays 0 (oldest byte at index 0).
  if (tail_ring_.size() < tail_cap_) {
    const auto room = static_cast<std::size_t>(tail_cap_ - tail_ring_.size());
    if (bytes.size() <= room) {
      tail_ring_.append(bytes);
      return;
    }
    tail_ring_.append(bytes.substr(0, room));
    bytes.remove_prefix(room);
  }

  // Ring is full: tail_pos_ is both the oldest byte and the next write position.
  const auto cap = static_cast<std::size_t>(tail_cap_);
  if (bytes.size() >= cap) {
    // Only the last cap bytes survive; overwrite the whole ring in order.
    std::memcpy(tail_ring_.data(), bytes.data() + (bytes.size() - cap), cap);
    tail_pos_ = 0;
    return;
  }
  const auto pos = static_cast<std::size_t>(tail_pos_);
  const std::size_t first = std::min(bytes.size(), cap - pos);
  std::memcpy(tail_ring_.data() + pos, bytes.data(), first);
  std::memcpy(tail_ring_.data(), bytes.data() + first, bytes.size() - first);
  tail_pos_ = (pos + bytes.size()) % cap;
}

void OutputCapture::write_spill(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(spill_fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno(kOutputStep, spill_path_, "writing spill file");
    }
    if (n == 0) {
      errno = EIO;
      throw_errno(kOutputStep, spill_path_, "writing spill file made no progress");
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

StreamCapture OutputCapture::finish() {
  if (finished_) throw_error(kOutputStep, spill_path_, "finish called twice");
  finished_ = true;

  StreamCapture capture;
  capture.total_bytes = total_;
  if (spill_fd_ >= 0) {
    const int fd = std::exchange(spill_fd_, -1);
    // Linux always releases the descriptor, even when close reports an error; never retry it.
    if (::close(fd) != 0 && errno != EINTR) throw_errno(kOutputStep, spill_path_, "closing spill file");
    capture.spill_path = spill_path_;
  }

  const std::uint64_t past_head = total_ - head_.size();
  capture.truncated = past_head > tail_cap_;
  capture.head = std::move(head_);
  if (!capture.truncated) {
    // Everything fits: the ring never wrapped, so it holds the rest of the stream in order. The tail is still
    // the stream's end (its last tail_cap_ bytes), overlapping the head, so a reader needs only the tail.
    capture.head += tail_ring_;
    const std::size_t keep = static_cast<std::size_t>(std::min<std::uint64_t>(tail_cap_, capture.head.size()));
    capture.tail = capture.head.substr(capture.head.size() - keep);
  } else {
    const auto pos = static_cast<std::size_t>(tail_pos_);
    capture.tail.reserve(tail_ring_.size());
    capture.tail.append(tail_ring_, pos, std::string::npos);
    capture.tail.append(tail_ring_, 0, pos);
  }
  tail_ring_.clear();
  tail_ring_.shrink_to_fit();
  return capture;
}

std::vector<std::string> last_lines(std::string_view tail, std::size_t max_lines, std::size_t max_bytes) {
  if (tail.size() > max_bytes) tail.remove_prefix(tail.size() - max_bytes);
  std::vector<std::string> lines;
  if (max_lines == 0 || tail.empty()) return lines;
  if (tail.back() == '\n') tail.remove_suffix(1);  // a final newline ends the last line
  std::size_t end = tail.size();
  while (lines.size() < max_lines) {
    const std::size_t newline = end == 0 ? std::string_view::npos : tail.rfind('\n', end - 1);
    const std::size_t start = newline == std::string_view::npos ? 0 : newline + 1;
    lines.emplace_back(tail.substr(start, end - start));
    if (newline == std::string_view::npos) break;
    end = newline;
  }
  std::reverse(lines.begin(), lines.end());
  return lines;
}

}  // namespace capsule::sandbox

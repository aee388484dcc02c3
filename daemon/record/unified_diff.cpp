// unified_diff: lines interned to ids, a linear-space Myers search (GNU diffseq's shape, without its
// heuristics) that marks changed lines, GNU's boundary shifting, then hunks with context; is_binary.
#include "daemon/record/unified_diff.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace capsule::daemon {
namespace {

constexpr std::size_t kBinaryProbeBytes = 8192;

// Length of the valid UTF-8 sequence starting at s[i], 0 when it is invalid, or -1 when it is cut
// short by the end of s (but valid so far).
int utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  int length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  for (int k = 1; k < length; ++k) {
    if (i + k >= s.size()) return -1;
    const unsigned char next = byte(i + k);
    if (k == 1 ? (next < low || next > high) : (next < 0x80 || next > 0xBF)) return 0;
  }
  return length;
}

// The input or the search passed a limit; the reason says which.
struct TooLarge {
  std::string reason;
};

// Lines of `text`, each with its "\n" when it has one (so a last line without one differs from the same
// line with one, as in diff).
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string_view::npos ? text.size() : newline + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

// One flag per line of a file, addressable from -1 to size (both always false), as shift_boundaries needs.
class ChangeFlags {
 public:
  explicit ChangeFlags(std::size_t lines) : flags_(lines + 2, 0) {}
  char& operator[](std::ptrdiff_t line) { return flags_[static_cast<std::size_t>(line + 1)]; }
  std::ptrdiff_t size() const { return static_cast<std::ptrdiff_t>(flags_.size()) - 2; }

 private:
  std::vector<char> flags_;
};

// Marks the lines of a minimal edit script: Myers' "middle snake" bisection (E. Myers, An O(ND)
// Difference Algorithm and Its Variations, 1986, section 4b), laid out as GNU diffseq's diag/compareseq.
class MyersSearch {
 public:
  MyersSearch(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b, ChangeFlags& changed_a,
              ChangeFlags& changed_b, const TextDiffLimits& limits)
      : a_(a), b_(b), changed_a_(changed_a), changed_b_(changed_b), limits_(limits),
        forward_(a.size() + b.size() + 3), backward_(a.size() + b.size() + 3),
        offset_(static_cast<std::ptrdiff_t>(b.size()) + 1) {}

  void run() { compare(0, size(a_), 0, size(b_)); }

 private:
  using Index = std::ptrdiff_t;
  static constexpr Index kFar = std::numeric_limits<Index>::max();  // a diagonal the backward search has not reached
  static Index size(const std::vector<std::uint32_t>& v) { return static_cast<Index>(v.size()); }

  Index& fd(Index diagonal) { return forward_[static_cast<std::size_t>(diagonal + offset_)]; }
  Index& bd(Index diagonal) { return backward_[static_cast<std::size_t>(diagonal + offset_)]; }
  bool equal(Index x, Index y) {
    spend(1);
    return a_[static_cast<std::size_t>(x)] == b_[static_cast<std::size_t>(y)];
  }
  void spend(std::size_t steps) {
    work_ += steps;
    if (work_ > limits_.max_work) throw TooLarge{"more than " + std::to_string(limits_.max_work) + " steps to diff"};
  }

  void check_edits(std::size_t at_least) const {
    if (at_least > limits_.max_edit_distance) {
      throw TooLarge{"more than " + std::to_string(limits_.max_edit_distance) + " changed lines"};
    }
  }

  // Diffs a[xoff, xlim) against b[yoff, ylim).
  void compare(Index xoff, Index xlim, Index yoff, Index ylim) {
    while (xoff < xlim && yoff < ylim && equal(xoff, yoff)) ++xoff, ++yoff;
    while (xoff < xlim && yoff < ylim && equal(xlim - 1, ylim - 1)) --xlim, --ylim;
    if (xoff == xlim || yoff == ylim) {
      marked_ += static_cast<std::size_t>((ylim - yoff) + (xlim - xoff));
      check_edits(marked_);
      while (yoff < ylim) changed_b_[yoff++] = 1;
      while (xoff < xlim) changed_a_[xoff++] = 1;
    } else {
      const auto [xmid, ymid] = middle(xoff, xlim, yoff, ylim);
      compare(xoff, xmid, yoff, ymid);
      compare(xmid, xlim, ymid, ylim);
    }
  }

  // A point (x, y) on a minimal path from (xoff, yoff) to (xlim, ylim), with the costs before and after it
  // both smaller than the whole: searches forward from the start and backward from the end, one more
  // edit each round, on diagonals k = x - y kept within the rectangle, until the two searches meet.
  std::pair<Index, Index> middle(Index xoff, Index xlim, Index yoff, Index ylim) {
    const Index dmin = xoff - ylim, dmax = xlim - yoff;  // the diagonals inside the rectangle
    const Index fmid = xoff - yoff, bmid = xlim - ylim;  // where each search starts
    Index fmin = fmid, fmax = fmid, bmin = bmid, bmax = bmid;
    const bool odd = ((fmid - bmid) & 1) != 0;
    fd(fmid) = xoff;
    bd(bmid) = xlim;
    for (std::size_t cost = 1;; ++cost) {
      // Not met yet: this part needs at least 2 * cost - 1 edits (one more after the forward round), so
      // a search that would pass the limit stops early; marking the lines checks the exact count.
      check_edits(2 * cost - 1);
      // Forward: one more edit on each diagonal, then the snake of equal lines that follows it.
      if (fmin > dmin) fd(--fmin - 1) = -1; else ++fmin;
      if (fmax < dmax) fd(++fmax + 1) = -1; else --fmax;
      spend(static_cast<std::size_t>(fmax - fmin) / 2 + 1);
      for (Index d = fmax; d >= fmin; d -= 2) {
        const Index low = fd(d - 1), high = fd(d + 1);
        Index x = low < high ? high : low + 1;
        Index y = x - d;
        while (x < xlim && y < ylim && equal(x, y)) ++x, ++y;
        fd(d) = x;
        if (odd && bmin <= d && d <= bmax && bd(d) <= x) return {x, y};
      }
      check_edits(2 * cost);
      // Backward, the same from the end.
      if (bmin > dmin) bd(--bmin - 1) = kFar; else ++bmin;
      if (bmax < dmax) bd(++bmax + 1) = kFar; else --bmax;
      spend(static_cast<std::size_t>(bmax - bmin) / 2 + 1);
      for (Index d = bmax; d >= bmin; d -= 2) {
        const Index low = bd(d - 1), high = bd(d + 1);
        Index x = low < high ? low : high - 1;
        Index y = x - d;
        while (xoff < x && yoff < y && equal(x - 1, y - 1)) --x, --y;
        bd(d) = x;
        if (!odd && fmin <= d && d <= fmax && x <= fd(d)) return {x, y};
      }
    }
  }

  const std::vector<std::uint32_t>& a_;
  const std::vector<std::uint32_t>& b_;
  ChangeFlags& changed_a_;
  ChangeFlags& changed_b_;
  const TextDiffLimits& limits_;
  std::vector<Index> forward_, backward_;  // furthest x reached on each diagonal, by diagonal + offset_
  Index offset_;
  std::size_t work_ = 0;
  std::size_t marked_ = 0;  // lines marked changed so far
};

// GNU diff's shift_boundaries (analyze.c): slides each run of changed lines over equal neighbours to join
// the runs before and after it, otherwise as far down as it goes, then back up to line up with a run of
// changes in the other file if it can. The edit script stays minimal.
void shift_boundaries(const std::vector<std::uint32_t>& ids, ChangeFlags& changed, ChangeFlags& other_changed) {
  using Index = std::ptrdiff_t;
  const auto id = [&](Index line) { return ids[static_cast<std::size_t>(line)]; };
  const Index end = changed.size();
  Index i = 0, j = 0;
  for (;;) {
    while (i < end && !changed[i]) {
      while (other_changed[j++]) continue;
      ++i;
    }
    if (i == end) break;
    Index start = i;
    while (changed[++i]) continue;
    while (other_changed[j]) ++j;
    Index run_length = 0, corresponding = end;
    do {
      run_length = i - start;
      while (start > 0 && id(start - 1) == id(i - 1)) {  // back, joining the run before
        changed[--start] = 1;
        changed[--i] = 0;
        while (changed[start - 1]) --start;
        while (other_changed[--j]) continue;
      }
      corresponding = other_changed[j - 1] ? i : end;
      while (i != end && id(start) == id(i)) {  // forward, joining the run after
        changed[start++] = 0;
        changed[i++] = 1;
        while (changed[i]) ++i;
        while (other_changed[++j]) corresponding = i;
      }
    } while (run_length != i - start);
    while (corresponding < i) {  // back to line up with the other file's changes
      changed[--start] = 1;
      changed[--i] = 0;
      while (other_changed[--j]) continue;
    }
  }
}

// One change: old lines [old_start, old_start + deleted) replaced by new lines [new_start, new_start + inserted).
struct Change {
  std::size_t old_start, deleted, new_start, inserted;
};

std::vector<Change> changes_of(ChangeFlags& changed_a, ChangeFlags& changed_b) {
  std::vector<Change> changes;
  std::ptrdiff_t i = 0, j = 0;
  while (i < changed_a.size() || j < changed_b.size()) {
    if (!changed_a[i] && !changed_b[j]) {
      ++i, ++j;
      continue;
    }
    Change change{static_cast<std::size_t>(i), 0, static_cast<std::size_t>(j), 0};
    for (; changed_a[i]; ++i) ++change.deleted;
    for (; changed_b[j]; ++j) ++change.inserted;
    changes.push_back(change);
  }
  return changes;
}

// "a,b" of a hunk header for lines [start, end) (0-based), as GNU prints it: "5" for one line, "4,0" (the
// line before) for none.
std::string header_range(std::size_t start, std::size_t end) {
  if (end == start) return std::to_string(start) + ",0";
  if (end == start + 1) return std::to_string(start + 1);
  return std::to_string(start + 1) + "," + std::to_string(end - start);
}

void append_line(std::string& out, char mark, std::string_view line) {
  out += mark;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

std::string format_hunks(const std::vector<std::string_view>& old_lines, const std::vector<std::string_view>& new_lines,
                         const std::vector<Change>& changes, std::size_t context) {
  std::string out;
  std::size_t first = 0;
  while (first < changes.size()) {
    // The changes of one hunk: those whose gaps are at most 2 * context unchanged lines.
    std::size_t last = first;
    while (last + 1 < changes.size() &&
           changes[last + 1].old_start - (changes[last].old_start + changes[last].deleted) <= 2 * context) {
      ++last;
    }
    const Change& head = changes[first];
    const Change& tail = changes[last];
    const std::size_t before = std::min(context, head.old_start);
    const std::size_t tail_old_end = tail.old_start + tail.deleted;
    const std::size_t after = std::min(context, old_lines.size() - tail_old_end);
    const std::size_t old_start = head.old_start - before, old_end = tail_old_end + after;
    const std::size_t new_start = head.new_start - before, new_end = tail.new_start + tail.inserted + after;
    out += "@@ -" + header_range(old_start, old_end) + " +" + header_range(new_start, new_end) + " @@\n";
    std::size_t line = old_start;
    for (std::size_t k = first; k <= last; ++k) {
      const Change& change = changes[k];
      for (; line < change.old_start; ++line) append_line(out, ' ', old_lines[line]);
      for (std::size_t n = 0; n < change.deleted; ++n) append_line(out, '-', old_lines[change.old_start + n]);
      for (std::size_t n = 0; n < change.inserted; ++n) append_line(out, '+', new_lines[change.new_start + n]);
      line = change.old_start + change.deleted;
    }
    for (; line < old_end; ++line) append_line(out, ' ', old_lines[line]);
    first = last + 1;
  }
  return out;
}

void check_bytes(std::string_view text, const TextDiffLimits& limits) {
  if (text.size() > limits.max_input_bytes) {
    throw TooLarge{"over " + std::to_string(limits.max_input_bytes) + " bytes"};
  }
}

void check_lines(const std::vector<std::string_view>& lines, const TextDiffLimits& limits) {
  if (lines.size() > limits.max_lines) throw TooLarge{"over " + std::to_string(limits.max_lines) + " lines"};
}

}  // namespace

bool is_binary(std::string_view bytes, bool cut) {
  if (bytes.substr(0, kBinaryProbeBytes).find('\0') != std::string_view::npos) return true;
  for (std::size_t i = 0; i < bytes.size();) {
    const int length = utf8_sequence_length(bytes, i);
    if (length == 0) return true;
    if (length < 0) return !cut;
    i += static_cast<std::size_t>(length);
  }
  return false;
}

TextDiff unified_diff(std::string_view old_text, std::string_view new_text, const TextDiffLimits& limits) {
  TextDiff diff;
  if (is_binary(old_text) || is_binary(new_text)) {
    diff.kind = TextDiff::Kind::binary;
    return diff;
  }
  try {
    check_bytes(old_text, limits);
    check_bytes(new_text, limits);
    const std::vector<std::string_view> old_lines = split_lines(old_text), new_lines = split_lines(new_text);
    check_lines(old_lines, limits);
    check_lines(new_lines, limits);

    std::unordered_map<std::string_view, std::uint32_t> ids;
    const auto intern = [&](const std::vector<std::string_view>& lines) {
      std::vector<std::uint32_t> out;
      out.reserve(lines.size());
      for (const auto line : lines) out.push_back(ids.emplace(line, static_cast<std::uint32_t>(ids.size())).first->second);
      return out;
    };
    const std::vector<std::uint32_t> a = intern(old_lines), b = intern(new_lines);

    ChangeFlags changed_a(a.size()), changed_b(b.size());
    MyersSearch(a, b, changed_a, changed_b, limits).run();
    shift_boundaries(a, changed_a, changed_b);
    shift_boundaries(b, changed_b, changed_a);
    diff.hunks = format_hunks(old_lines, new_lines, changes_of(changed_a, changed_b), limits.context_lines);
  } catch (const TooLarge& e) {
    diff.kind = TextDiff::Kind::too_large;
    diff.reason = e.reason;
  }
  return diff;
}

}  // namespace capsule::daemon

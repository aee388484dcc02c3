// Unified text diffs (`diff -u` hunks) of two byte strings for the session diff: Myers' O((N+M)D) line diff
// in linear space, bounded in input size, line count, edit distance and work; binary inputs give no text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace capsule::daemon {

struct TextDiffLimits {
  std::size_t max_input_bytes = 1 << 20;  // each side; a larger input is too large to diff
  std::size_t max_lines = 100000;         // each side
  std::size_t max_edit_distance = 10000;  // inserted + deleted lines of a minimal diff
  std::size_t max_work = 50'000'000;      // line comparisons and diagonal steps of the search, all told
  std::size_t context_lines = 3;
};

struct TextDiff {
  enum class Kind { text, binary, too_large };
  Kind kind = Kind::text;
  // Kind::text: the hunks, each "@@ -a,b +c,d @@" then " ", "-", "+" lines as GNU `diff -u` prints them
  // (without the "---"/"+++" header lines), "\ No newline at end of file" after a last line without one;
  // empty when the inputs are equal. Valid UTF-8, since both inputs are. Empty for the other kinds.
  std::string hunks;
  std::string reason;  // Kind::too_large: which limit was passed ("over 1048576 bytes", ...)
};

// Binary: a NUL byte in the first 8 KiB (as git and GNU diff decide), or bytes that are not valid UTF-8
// (overlong forms, surrogates and code points past U+10FFFF are invalid). The second rule also marks
// Latin-1 and other legacy encodings binary: the diff travels in JSON, which must be UTF-8, and a patch
// with replaced bytes would not apply. `cut`: the bytes are a prefix of the content, so a multi-byte
// sequence cut short at their end is not held against them.
bool is_binary(std::string_view bytes, bool cut = false);

// The unified diff turning `old_text` into `new_text`, lines split after each "\n". Either side binary:
// Kind::binary. Either side past a size or line limit, or a minimal diff past the edit distance or work
// limit: Kind::too_large, found before the work is spent (the search stops at the first limit it passes).
// The diff is minimal; among minimal diffs, changes are slid to join neighbouring ones and otherwise
// placed as late as they can go, as GNU diff does, so the output reads like `diff -u`.
TextDiff unified_diff(std::string_view old_text, std::string_view new_text, const TextDiffLimits& limits = {});

}  // namespace capsule::daemon

// unified_diff against GNU `diff -u` (hunks compared byte for byte) on generated cases, minimality against
// a brute-force LCS, patches that `patch` applies, binary detection and every too-large limit.
#include "daemon/record/unified_diff.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

class UnifiedDiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-udiff-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << text;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string run(const std::string& command) const {
    std::string out;
    FILE* pipe = popen(("cd " + dir_ + " && " + command).c_str(), "r");
    if (pipe == nullptr) return "popen failed";
    char buffer[4096];
    while (const std::size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
    pclose(pipe);
    return out;
  }

  // GNU diff -u's hunks: its output without the two header lines.
  std::string gnu_hunks(const std::string& old_text, const std::string& new_text) const {
    write("old", old_text);
    write("new", new_text);
    const std::string out = run("/usr/bin/diff -u old new");
    if (out.empty()) return out;
    const std::size_t second_newline = out.find('\n', out.find('\n') + 1);
    return out.substr(second_newline + 1);
  }

  // `old_text` with `hunks` applied by patch(1).
  std::string patched(const std::string& old_text, const std::string& hunks) const {
    write("target", old_text);
    write("change.patch", "--- a/target\n+++ b/target\n" + hunks);
    run("/usr/bin/patch -s -o result target < change.patch");
    return read("result");
  }

  std::string dir_;
};

std::string lines_of(const std::vector<std::string>& lines, bool final_newline = true) {
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    text += lines[i];
    if (i + 1 < lines.size() || final_newline) text += "\n";
  }
  return text;
}

std::vector<std::string> numbered(int from, int to) {
  std::vector<std::string> lines;
  for (int i = from; i <= to; ++i) lines.push_back("line " + std::to_string(i));
  return lines;
}

// Inputs of `count` lines drawn from `alphabet` distinct ones (few: many repeats), and an edited copy.
std::pair<std::string, std::string> random_pair(std::mt19937& random, int count, int alphabet, int edits) {
  std::uniform_int_distribution<int> pick(0, alphabet - 1);
  std::vector<std::string> old_lines;
  for (int i = 0; i < count; ++i) old_lines.push_back("l" + std::to_string(pick(random)));
  std::vector<std::string> new_lines = old_lines;
  for (int e = 0; e < edits; ++e) {
    std::uniform_int_distribution<std::size_t> where(0, new_lines.size());
    const std::size_t at = where(random);
    switch (random() % 3) {
      case 0: new_lines.insert(new_lines.begin() + static_cast<std::ptrdiff_t>(at), "l" + std::to_string(pick(random))); break;
      case 1: if (at < new_lines.size()) new_lines.erase(new_lines.begin() + static_cast<std::ptrdiff_t>(at)); break;
      default: if (at < new_lines.size()) new_lines[at] = "l" + std::to_string(pick(random)); break;
    }
  }
  return {lines_of(old_lines, random() % 4 != 0), lines_of(new_lines, random() % 4 != 0)};
}

std::size_t changed_lines(const std::string& hunks) {
  std::size_t count = 0;
  std::istringstream in(hunks);
  for (std::string line; std::getline(in, line);) count += !line.empty() && (line[0] == '+' || line[0] == '-');
  return count;
}

// N + M - 2 * LCS: the size of a minimal edit script, by dynamic programming.
std::size_t minimal_edits(const std::string& old_text, const std::string& new_text) {
  const auto split = [](const std::string& text) {
    std::vector<std::string> lines;
    for (std::size_t start = 0; start < text.size();) {
      const std::size_t end = std::min(text.find('\n', start), text.size() - 1) + 1;
      lines.push_back(text.substr(start, end - start));
      start = end;
    }
    return lines;
  };
  const auto a = split(old_text), b = split(new_text);
  std::vector<std::vector<std::size_t>> lcs(a.size() + 1, std::vector<std::size_t>(b.size() + 1, 0));
  for (std::size_t i = a.size(); i-- > 0;) {
    for (std::size_t j = b.size(); j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  return a.size() + b.size() - 2 * lcs[0][0];
}

TEST_F(UnifiedDiffTest, MatchesGnuDiffOnHandPickedCases) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", ""},
      {"", lines_of({"a", "b"})},
      {lines_of({"a", "b"}), ""},
      {lines_of(numbered(1, 10)), lines_of(numbered(1, 10))},
      {lines_of({"a", "b"}, false), lines_of({"a", "c"}, false)},  // neither ends in a newline
      {lines_of({"a", "b"}, false), lines_of({"a", "b"})},         // the newline added
      {lines_of({"a", "b"}), lines_of({"a", "b"}, false)},         // the newline removed
      {lines_of(numbered(1, 20), false), lines_of(numbered(1, 20), false) + "\nline 21"},  // last line kept as context
      {lines_of(numbered(1, 30)), lines_of(numbered(0, 30))},      // inserted first line
      {lines_of(numbered(1, 30)), lines_of(numbered(1, 29))},      // deleted last line
      {"x\n" + lines_of(numbered(2, 8)) + "y\n" + lines_of(numbered(10, 30)),  // 7 lines apart: two hunks
       "X\n" + lines_of(numbered(2, 8)) + "Y\n" + lines_of(numbered(10, 30))},
      {"x\n" + lines_of(numbered(2, 7)) + "y\n" + lines_of(numbered(9, 30)),   // 6 lines apart: one hunk
       "X\n" + lines_of(numbered(2, 7)) + "Y\n" + lines_of(numbered(9, 30))},
      // A function added between others: the blank lines and braces repeat; GNU slides the change down.
      {"int a() {\n  return 1;\n}\n\nint c() {\n  return 3;\n}\n",
       "int a() {\n  return 1;\n}\n\nint b() {\n  return 2;\n}\n\nint c() {\n  return 3;\n}\n"},
      {lines_of({"a", "b", "c", "d"}), lines_of({"d", "c", "b", "a"})},
      {lines_of({"b", "b"}), lines_of({"a", "b", "a"})},  // GNU's boundary shifting decides where "-b" goes
      {"\xc3\xa9t\xc3\xa9\n\xe2\x82\xac\n", "\xc3\xa9t\xc3\xa9\n\xf0\x9f\x99\x82\n"},  // UTF-8 is text
  };
  for (const auto& [old_text, new_text] : cases) {
    const TextDiff diff = unified_diff(old_text, new_text);
    ASSERT_EQ(diff.kind, TextDiff::Kind::text);
    EXPECT_EQ(diff.hunks, gnu_hunks(old_text, new_text)) << "old:\n" << old_text << "\nnew:\n" << new_text;
  }
}

TEST_F(UnifiedDiffTest, MatchesGnuDiffOnGeneratedCases) {
  std::mt19937 random(12);
  for (int round = 0; round < 12; ++round) {
    const int alphabet = round % 3 == 0 ? 20 : 1000;  // some lines repeat, or almost none
    const auto [old_text, new_text] = random_pair(random, 60 + round * 20, alphabet, 1 + round % 6);
    EXPECT_EQ(unified_diff(old_text, new_text).hunks, gnu_hunks(old_text, new_text)) << "round " << round;
  }
}

// With many repeated lines several minimal diffs exist and GNU's choice also depends on heuristics this
// one does not copy; what must hold: the diff is minimal and patch(1) applies it.
TEST_F(UnifiedDiffTest, RepetitiveInputsGiveMinimalDiffsThatApply) {
  std::mt19937 random(7);
  for (int round = 0; round < 40; ++round) {
    const auto [old_text, new_text] = random_pair(random, 5 + round * 3, 2 + round % 5, 1 + round % 9);
    const TextDiff diff = unified_diff(old_text, new_text);
    ASSERT_EQ(diff.kind, TextDiff::Kind::text);
    EXPECT_EQ(changed_lines(diff.hunks), minimal_edits(old_text, new_text)) << "round " << round;
    if (!diff.hunks.empty()) {
      EXPECT_EQ(patched(old_text, diff.hunks), new_text) << "round " << round;
    }
  }
}

TEST_F(UnifiedDiffTest, HunkHeadersCountLinesAsGnuDoes) {
  EXPECT_EQ(unified_diff("", "a\n").hunks, "@@ -0,0 +1 @@\n+a\n");
  EXPECT_EQ(unified_diff("a\n", "").hunks, "@@ -1 +0,0 @@\n-a\n");
  EXPECT_EQ(unified_diff("a\nb\n", "a\nc\n").hunks, "@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
  EXPECT_EQ(unified_diff("a", "b").hunks,
            "@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n");
  EXPECT_EQ(unified_diff("same\n", "same\n").hunks, "");
}

TEST_F(UnifiedDiffTest, ContextLinesAreALimit) {
  TextDiffLimits limits;
  limits.context_lines = 0;
  EXPECT_EQ(unified_diff(lines_of(numbered(1, 5)), lines_of({"line 1", "line 2", "X", "line 4", "line 5"}), limits).hunks,
            "@@ -3 +3 @@\n-line 3\n+X\n");
}

TEST_F(UnifiedDiffTest, BinaryIsANulInTheFirst8KiBOrInvalidUtf8) {
  EXPECT_FALSE(is_binary("plain text\n"));
  EXPECT_FALSE(is_binary("\xc3\xa9\xe2\x82\xac\xf0\x9f\x99\x82"));  // 2, 3 and 4 byte sequences
  EXPECT_TRUE(is_binary(std::string("a\0b", 3)));
  EXPECT_TRUE(is_binary("caf\xe9\n"));        // Latin-1
  EXPECT_TRUE(is_binary("\xc0\xaf"));         // overlong "/"
  EXPECT_TRUE(is_binary("\xed\xa0\x80"));     // a surrogate
  EXPECT_TRUE(is_binary("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_TRUE(is_binary("\xe2\x82"));         // cut short at the end of the whole content
  EXPECT_FALSE(is_binary("\xe2\x82", true));  // ... but not at the end of a prefix
  EXPECT_FALSE(is_binary(std::string(8192, 'a') + std::string(1, '\0')));  // past the probe, NUL is text

  const TextDiff diff = unified_diff("text\n", std::string("te\0xt\n", 6));
  EXPECT_EQ(diff.kind, TextDiff::Kind::binary);
  EXPECT_EQ(diff.hunks, "");
  EXPECT_EQ(unified_diff("caf\xe9\n", "cafe\n").kind, TextDiff::Kind::binary);
}

TEST_F(UnifiedDiffTest, InputsPastTheSizeLimitsAreTooLarge) {
  TextDiffLimits limits;
  limits.max_input_bytes = 100;
  EXPECT_EQ(unified_diff(std::string(100, 'a'), "b", limits).kind, TextDiff::Kind::text);
  const TextDiff big = unified_diff(std::string(101, 'a'), "b", limits);
  EXPECT_EQ(big.kind, TextDiff::Kind::too_large);
  EXPECT_EQ(big.reason, "over 100 bytes");
  EXPECT_EQ(big.hunks, "");
  EXPECT_EQ(unified_diff("b", std::string(101, 'a'), limits).kind, TextDiff::Kind::too_large);

  limits = {};
  limits.max_lines = 10;
  EXPECT_EQ(unified_diff(lines_of(numbered(1, 10)), "", limits).kind, TextDiff::Kind::text);
  const TextDiff many = unified_diff("", lines_of(numbered(1, 11)), limits);
  EXPECT_EQ(many.kind, TextDiff::Kind::too_large);
  EXPECT_EQ(many.reason, "over 10 lines");
}

TEST_F(UnifiedDiffTest, EditDistancePastTheLimitIsTooLarge) {
  // 100 lines replaced by 100 others, between equal heads and tails: 200 changed lines.
  const std::string head = lines_of(numbered(1, 50)), tail = lines_of(numbered(300, 350));
  const std::string old_text = head + lines_of(numbered(100, 199)) + tail;
  const std::string new_text = head + lines_of(numbered(200, 299)) + tail;
  TextDiffLimits limits;
  limits.max_edit_distance = 200;
  const TextDiff within = unified_diff(old_text, new_text, limits);
  ASSERT_EQ(within.kind, TextDiff::Kind::text);
  EXPECT_EQ(changed_lines(within.hunks), 200u);
  limits.max_edit_distance = 199;
  const TextDiff past = unified_diff(old_text, new_text, limits);
  EXPECT_EQ(past.kind, TextDiff::Kind::too_large);
  EXPECT_EQ(past.reason, "more than 199 changed lines");
}

TEST_F(UnifiedDiffTest, SearchWorkPastTheLimitIsTooLarge) {
  std::mt19937 random(3);
  const auto [old_text, new_text] = random_pair(random, 2000, 3, 400);
  TextDiffLimits limits;
  EXPECT_EQ(unified_diff(old_text, new_text, limits).kind, TextDiff::Kind::text);
  limits.max_work = 10000;
  const TextDiff past = unified_diff(old_text, new_text, limits);
  EXPECT_EQ(past.kind, TextDiff::Kind::too_large);
  EXPECT_EQ(past.reason, "more than 10000 steps to diff");
}

}  // namespace
}  // namespace capsule::daemon

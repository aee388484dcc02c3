// Tests for OutputCapture: head/tail bounds against a reference string, byte counting, cap 0,
// the spill file (contents, mode, errors) and a 100 MB stream that must be handled in linear time.
#include "sandbox/output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sandbox/error.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the temp dir, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "capsule-output-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Deterministic, position-dependent bytes so a misplaced byte cannot go unnoticed.
char byte_at(std::uint64_t i) { return static_cast<char>((i * 131 + (i >> 8) * 7 + (i >> 16)) & 0xff); }

std::string reference(std::size_t size, std::uint64_t offset = 0) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = byte_at(offset + i);
  return s;
}

using capsule::testing::slurp;

// Checks a capture of `stream` against the documented contract for `cap`.
void expect_capture(const StreamCapture& got, const std::string& stream, std::uint64_t cap) {
  ASSERT_EQ(got.total_bytes, stream.size());
  const std::size_t head_cap = static_cast<std::size_t>(cap / 2);
  const std::size_t tail_cap = static_cast<std::size_t>(cap - cap / 2);
  if (stream.size() <= cap) {  // the head is the whole stream, the tail its end all the same
    EXPECT_FALSE(got.truncated);
    EXPECT_EQ(got.head, stream);
    EXPECT_EQ(got.tail, stream.substr(stream.size() - std::min(tail_cap, stream.size())));
    return;
  }
  EXPECT_TRUE(got.truncated);
  EXPECT_EQ(got.head, stream.substr(0, head_cap));
  EXPECT_EQ(got.tail, stream.substr(stream.size() - tail_cap));
}

TEST(OutputCapture, SmallStreamIsKeptWhole) {
  OutputCapture capture(1024, "");
  capture.append("hello, ");
  capture.append("");
  capture.append("world\n");
  const StreamCapture got = capture.finish();
  EXPECT_EQ(got.total_bytes, 13u);
  EXPECT_FALSE(got.truncated);
  EXPECT_EQ(got.head, "hello, world\n");
  EXPECT_EQ(got.tail, "hello, world\n");  // the end of the stream even when nothing was cut
  EXPECT_TRUE(got.spill_path.empty());
}

TEST(OutputCapture, TailIsTheEndOfAStreamThatFitsTheCap) {
  OutputCapture capture(10, "");
  capture.append("abcdefgh");
  const StreamCapture got = capture.finish();
  EXPECT_FALSE(got.truncated);
  EXPECT_EQ(got.head, "abcdefgh");
  EXPECT_EQ(got.tail, "defgh");
}

TEST(LastLines, TheLastLinesOfTheTailOldestFirst) {
  EXPECT_EQ(last_lines("a\nb\nc\n", 2, 1024), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(last_lines("a\nb\nc", 2, 1024), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(last_lines("a\nb\nc\n", 100, 1024), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(last_lines("a\n\n", 100, 1024), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(last_lines("\n", 100, 1024), (std::vector<std::string>{""}));
  EXPECT_TRUE(last_lines("", 100, 1024).empty());
  EXPECT_TRUE(last_lines("a\nb\n", 0, 1024).empty());
  // Only the last max_bytes are looked at: the first line kept may start mid-line.
  EXPECT_EQ(last_lines("first line\nsecond\n", 100, 9), (std::vector<std::string>{"e", "second"}));
}

TEST(OutputCapture, EmptyStream) {
  OutputCapture capture(16, "");
  const StreamCapture got = capture.finish();
  EXPECT_EQ(got.total_bytes, 0u);
  EXPECT_FALSE(got.truncated);
  EXPECT_TRUE(got.head.empty());
  EXPECT_TRUE(got.tail.empty());
}

TEST(OutputCapture, ExactlyAtCapIsNotTruncated) {
  for (std::uint64_t cap : {1u, 2u, 7u, 64u, 101u}) {
    SCOPED_TRACE("cap " + std::to_string(cap));
    const std::string stream = reference(cap);
    {
      OutputCapture capture(cap, "");
      capture.append(stream);
      expect_capture(capture.finish(), stream, cap);
    }
    {
      OutputCapture capture(cap, "");
      for (char c : stream) capture.append(std::string_view(&c, 1));
      expect_capture(capture.finish(), stream, cap);
    }
  }
}

TEST(OutputCapture, OneByteOverCapIsTruncated) {
  for (std::uint64_t cap : {1u, 2u, 7u, 64u, 101u}) {
    SCOPED_TRACE("cap " + std::to_string(cap));
    const std::string stream = reference(cap + 1);
    OutputCapture capture(cap, "");
    capture.append(stream);
    const StreamCapture got = capture.finish();
    expect_capture(got, stream, cap);
    EXPECT_EQ(got.head.size() + got.tail.size(), cap);
  }
}

TEST(OutputCapture, OverCapInManySmallAppends) {
  const std::string stream = reference(50'000);
  for (std::uint64_t cap : {1u, 2u, 3u, 10u, 99u, 100u, 4096u, 49'999u}) {
    for (std::size_t step : {1u, 3u, 17u, 250u, 1000u}) {
      SCOPED_TRACE("cap " + std::to_string(cap) + " step " + std::to_string(step));
      OutputCapture capture(cap, "");
      // Vary the chunk size so appends straddle the head/tail boundary and the ring wrap point.
      std::size_t pos = 0;
      for (std::size_t n = 0; pos < stream.size(); ++n) {
        const std::size_t len = std::min(stream.size() - pos, step + n % 5);
        capture.append(std::string_view(stream).substr(pos, len));
        pos += len;
      }
      expect_capture(capture.finish(), stream, cap);
    }
  }
}

TEST(OutputCapture, OverCapInOneGiantAppend) {
  const std::string stream = reference(1'000'003);
  for (std::uint64_t cap : {1u, 10u, 99u, 65'536u, 1'000'002u}) {
    SCOPED_TRACE("cap " + std::to_string(cap));
    OutputCapture capture(cap, "");
    capture.append(stream);
    expect_capture(capture.finish(), stream, cap);
  }
}

TEST(OutputCapture, GiantAppendAfterRingHasWrapped) {
  const std::uint64_t cap = 100;
  std::string stream = reference(173);
  OutputCapture capture(cap, "");
  capture.append(stream);  // ring is full and its write position is mid-buffer
  const std::string big = reference(5'000, stream.size());
  capture.append(big);
  stream += big;
  const std::string small = reference(13, stream.size());
  capture.append(small);
  stream += small;
  expect_capture(capture.finish(), stream, cap);
}

TEST(OutputCapture, CapZeroKeepsNothingButCounts) {
  OutputCapture capture(0, "");
  capture.append("abc");
  capture.append(reference(10'000));
  const StreamCapture got = capture.finish();
  EXPECT_EQ(got.total_bytes, 10'003u);
  EXPECT_TRUE(got.truncated);
  EXPECT_TRUE(got.head.empty());
  EXPECT_TRUE(got.tail.empty());
}

TEST(OutputCapture, CapZeroWithEmptyStreamIsNotTruncated) {
  OutputCapture capture(0, "");
  const StreamCapture got = capture.finish();
  EXPECT_EQ(got.total_bytes, 0u);
  EXPECT_FALSE(got.truncated);
}

TEST(OutputCapture, SpillFileReceivesEveryByteWithMode0600) {
  TempDir dir;
  const std::string path = (dir / "stdout.spill").string();
  const std::string stream = reference(300'000);
  OutputCapture capture(64, path);
  for (std::size_t pos = 0; pos < stream.size(); pos += 4093) {
    capture.append(std::string_view(stream).substr(pos, 4093));
  }
  const StreamCapture got = capture.finish();
  expect_capture(got, stream, 64);
  EXPECT_EQ(got.spill_path, path);

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(slurp(path), stream);
}

TEST(OutputCapture, SpillWithCapZeroStillWritesEverything) {
  TempDir dir;
  const std::string path = (dir / "stderr.spill").string();
  const std::string stream = reference(12'345);
  OutputCapture capture(0, path);
  capture.append(stream);
  const StreamCapture got = capture.finish();
  EXPECT_EQ(got.total_bytes, stream.size());
  EXPECT_TRUE(got.head.empty());
  EXPECT_TRUE(got.tail.empty());
  EXPECT_EQ(got.spill_path, path);
  EXPECT_EQ(slurp(path), stream);
}

TEST(OutputCapture, SpillTruncatesExistingFileAndForcesMode0600) {
  TempDir dir;
  const fs::path path = dir / "old.spill";
  { std::ofstream(path, std::ios::binary) << std::string(10'000, 'x'); }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);

  OutputCapture capture(1024, path.string());
  capture.append("new");
  EXPECT_EQ(capture.finish().spill_path, path.string());
  EXPECT_EQ(slurp(path), "new");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST(OutputCapture, UnwritableSpillPathThrowsWithPath) {
  TempDir dir;
  // A missing parent directory fails even for root, unlike permission bits.
  const std::string path = (dir / "no-such-dir" / "out.spill").string();
  try {
    OutputCapture capture(1024, path);
    FAIL() << "expected SandboxError";
  } catch (const SandboxError& e) {
    EXPECT_EQ(e.cause().step, "output");
    EXPECT_EQ(e.cause().path, path);
    EXPECT_NE(e.cause().errno_value, 0);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(OutputCapture, SpillPathThatIsADirectoryThrows) {
  TempDir dir;
  const std::string path = (dir / "subdir").string();
  fs::create_directory(path);
  EXPECT_THROW(OutputCapture(16, path), SandboxError);
}

TEST(OutputCapture, DestructorWithoutFinishKeepsWrittenBytes) {
  TempDir dir;
  const std::string path = (dir / "abandoned.spill").string();
  {
    OutputCapture capture(8, path);
    capture.append("partial output");
  }
  EXPECT_EQ(slurp(path), "partial output");
}

TEST(OutputCapture, HundredMegabytesInChunksIsLinear) {
  constexpr std::uint64_t kTotal = 100ull << 20;
  constexpr std::size_t kChunk = 64 << 10;
  constexpr std::uint64_t kCap = 1 << 20;

  // Every chunk differs (the chunk index is stamped into it), so a misplaced chunk is caught.
  std::string chunk = reference(kChunk);
  OutputCapture capture(kCap, "");
  std::vector<std::string> last_chunks;  // the chunks that make up the expected tail
  const std::uint64_t chunks = kTotal / kChunk;
  const std::uint64_t tail_chunks = (kCap - kCap / 2) / kChunk;
  std::string expected_head;
  for (std::uint64_t n = 0; n < chunks; ++n) {
    for (std::size_t k = 0; k < sizeof(n); ++k) chunk[k] = static_cast<char>((n >> (8 * k)) & 0xff);
    capture.append(chunk);
    if (expected_head.size() < kCap / 2) expected_head += chunk;
    if (n + tail_chunks >= chunks) last_chunks.push_back(chunk);
  }
  expected_head.resize(kCap / 2);
  std::string expected_tail;
  for (const auto& c : last_chunks) expected_tail += c;

  const StreamCapture got = capture.finish();
  EXPECT_EQ(got.total_bytes, kTotal);
  EXPECT_TRUE(got.truncated);
  EXPECT_EQ(got.head, expected_head);
  EXPECT_EQ(got.tail, expected_tail);
}

}  // namespace
}  // namespace capsule::sandbox

// LogReader and the log cap: reading in bounded pieces (resuming where it stopped, following a growing log),
// a stream cut short, corrupt data, head + marker + tail of a capped log exactly, and the writers' signals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>

#include "daemon/logs/log_store.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

class LogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-logreader-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

std::string random_text(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string text(size, '\0');
  for (auto& c : text) c = static_cast<char>(rng() & 0xff);
  return text;
}

using capsule::testing::slurp;

using capsule::testing::open_fds;

TEST_F(LogReaderTest, ReadsInBoundedPiecesAndResumes) {
  LogStore store(dir_, LogStoreOptions{0});
  const std::string expected = random_text(1'000'000, 1) + std::string(3'000'000, 'z');
  store.open_writer("r", Stream::kStdout)->append(expected);
  auto reader = store.open_reader("r", Stream::kStdout);
  std::string got;
  std::size_t pieces = 0;
  for (std::string piece = reader->read(10'000); !piece.empty(); piece = reader->read(10'000)) {
    ASSERT_LE(piece.size(), 10'000u);
    got += piece;
    ++pieces;
  }
  EXPECT_TRUE(reader->finished());
  EXPECT_EQ(got, expected);
  EXPECT_EQ(reader->position(), expected.size());
  EXPECT_GE(pieces, expected.size() / 10'000);
  EXPECT_EQ(reader->read(), "") << "after the end";
}

TEST_F(LogReaderTest, FollowsALogAsItGrows) {
  LogStore store(dir_, LogStoreOptions{0});
  auto writer = store.open_writer("r", Stream::kStdout);
  auto reader = store.open_reader("r", Stream::kStdout);
  EXPECT_EQ(reader->read(), "");
  EXPECT_FALSE(reader->finished());
  std::string all;
  for (int i = 0; i < 50; ++i) {
    const std::string line = "line " + std::to_string(i) + " " + random_text(i * 997, i) + "\n";
    writer->append(line);
    all += line;
    std::string got;
    for (std::string piece = reader->read(4096); !piece.empty(); piece = reader->read(4096)) got += piece;
    ASSERT_EQ(got, line) << "append " << i;
    EXPECT_FALSE(reader->finished());
  }
  writer->close();
  EXPECT_EQ(reader->read(), "");
  EXPECT_TRUE(reader->finished()) << "the trailer written at close was read";
  EXPECT_EQ(reader->position(), all.size());
}

TEST_F(LogReaderTest, AStreamCutShortYieldsItsPrefixWithoutError) {
  LogStore store(dir_, LogStoreOptions{0});
  const std::string expected = random_text(200'000, 3);
  {
    auto writer = store.open_writer("r", Stream::kStdout);
    writer->append(expected.substr(0, 100'000));
    writer->append(expected.substr(100'000));
  }
  const std::string path = store.path("r", Stream::kStdout);
  const auto full = std::filesystem::file_size(path);
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(full / 2)), 0);
  auto reader = store.open_reader("r", Stream::kStdout);
  std::string got;
  for (std::string piece = reader->read(); !piece.empty(); piece = reader->read()) got += piece;
  EXPECT_FALSE(reader->finished());
  EXPECT_GT(got.size(), 0u);
  EXPECT_LT(got.size(), expected.size());
  EXPECT_EQ(got, expected.substr(0, got.size())) << "a prefix, byte for byte";
}

TEST_F(LogReaderTest, CorruptDataIsAClearErrorNamingTheFile) {
  LogStore store(dir_, LogStoreOptions{0});
  {
    auto writer = store.open_writer("r", Stream::kStdout);
    writer->append(random_text(300'000, 4));
  }
  const std::string path = store.path("r", Stream::kStdout);
  std::string bytes = slurp(path);
  for (std::size_t i = 1000; i < bytes.size() - 100; i += 7) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto reader = store.open_reader("r", Stream::kStdout);
  try {
    for (int i = 0; i < 100 && !reader->read().empty(); ++i) {
    }
    FAIL() << "no error for corrupt data";
  } catch (const LogStoreError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": corrupt log"), std::string::npos) << e.what();
  }
}

TEST_F(LogReaderTest, ACappedLogKeepsHeadMarkerAndTailExactly) {
  constexpr std::uint64_t kCap = 64 * 1024;
  LogStore store(dir_, LogStoreOptions{kCap});
  const std::size_t fds_before = open_fds();
  const std::string written = random_text(1'000'003, 5);
  {
    auto writer = store.open_writer("r", Stream::kStdout);
    // Uneven appends, some larger than the ring, some crossing the head boundary and the ring's end.
    std::size_t at = 0;
    for (std::size_t size : {1000u, 40000u, 100000u, 7u, 33333u}) {
      writer->append(std::string_view(written).substr(at, size));
      at += size;
    }
    while (at < written.size()) {
      const std::size_t size = std::min<std::size_t>(12345, written.size() - at);
      writer->append(std::string_view(written).substr(at, size));
      at += size;
    }
    EXPECT_EQ(writer->bytes_appended(), written.size());
    EXPECT_EQ(open_fds(), fds_before + 2) << "the log and its ring";
    writer->close();
  }
  EXPECT_EQ(open_fds(), fds_before) << "the ring is closed with the log";
  const std::uint64_t dropped = written.size() - kCap;
  const std::string expected =
      written.substr(0, kCap / 2) + truncation_marker(dropped) + written.substr(written.size() - kCap / 2);
  EXPECT_EQ(store.read_all("r", Stream::kStdout), expected);
  EXPECT_NE(truncation_marker(dropped).find(std::to_string(dropped) + " bytes dropped"), std::string::npos);
  auto cut = store.truncation("r", Stream::kStdout);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->total_bytes, written.size());
  EXPECT_EQ(cut->dropped_bytes, dropped);
  EXPECT_FALSE(store.truncation("r", Stream::kStderr).has_value());
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "r.stdout.z" || name == "r.stdout.z.truncated") << "left behind: " << name;
  }
  store.remove("r");
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(LogReaderTest, ALogUnderTheCapOrJustPastItIsExact) {
  constexpr std::uint64_t kCap = 8192;
  LogStore store(dir_, LogStoreOptions{kCap});
  const std::string exact = random_text(kCap, 6);
  store.open_writer("fits", Stream::kStdout)->append(exact);
  EXPECT_EQ(store.read_all("fits", Stream::kStdout), exact);
  EXPECT_FALSE(store.truncation("fits", Stream::kStdout).has_value());

  const std::string over = random_text(kCap + 1, 7);  // one byte dropped
  {
    auto writer = store.open_writer("over", Stream::kStdout);
    for (char c : over) writer->append(std::string(1, c));
  }
  EXPECT_EQ(store.read_all("over", Stream::kStdout),
            over.substr(0, kCap / 2) + truncation_marker(1) + over.substr(kCap / 2 + 1));
  EXPECT_EQ(store.truncation("over", Stream::kStdout)->dropped_bytes, 1u);

  // A new writer for the same run starts over: the old note goes.
  store.open_writer("over", Stream::kStdout)->append("short");
  EXPECT_FALSE(store.truncation("over", Stream::kStdout).has_value());
}

TEST_F(LogReaderTest, WritersSignalTheirLogsWatchers) {
  LogStore store(dir_, LogStoreOptions{4096});
  std::atomic<int> stdout_signals{0}, stderr_signals{0};
  auto watch_out = store.watch("r", Stream::kStdout, [&](LogEvent event) {
    EXPECT_EQ(event, LogEvent::kWritten);
    ++stdout_signals;
  });
  auto watch_err = store.watch("r", Stream::kStderr, [&](LogEvent) { ++stderr_signals; });
  auto writer = store.open_writer("r", Stream::kStdout);
  EXPECT_EQ(stdout_signals, 0) << "opening writes nothing";
  writer->append("a");
  writer->append("");
  EXPECT_EQ(stdout_signals, 1) << "one append (the empty one is nothing new)";
  writer->append(std::string(5000, 'x'));  // past the head: the rest goes to the ring
  EXPECT_EQ(stdout_signals, 2);
  writer->append("only in the ring");
  EXPECT_EQ(stdout_signals, 2) << "nothing new in the file";
  writer->close();
  EXPECT_EQ(stdout_signals, 3) << "close";
  EXPECT_EQ(stderr_signals, 0);
  watch_out.reset();
  store.open_writer("r", Stream::kStdout)->append("again");
  EXPECT_EQ(stdout_signals, 3) << "unsubscribed";
}

}  // namespace
}  // namespace capsule::daemon

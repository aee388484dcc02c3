// LogStore: round trips, reading a log that is still being written, file naming and mode, large and
// binary output, removal, and errors that name the file (unopenable, corrupt, bad run ids).
#include "daemon/logs/log_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "store/digest.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-logs-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

using capsule::testing::slurp;

TEST_F(LogStoreTest, RoundTripsBothStreams) {
  LogStore store(dir_ + "/logs");  // created on demand
  EXPECT_EQ(store.path("r1", Stream::kStdout), dir_ + "/logs/r1.stdout.z");
  EXPECT_EQ(store.path("r1", Stream::kStderr), dir_ + "/logs/r1.stderr.z");
  {
    auto out = store.open_writer("r1", Stream::kStdout);
    auto err = store.open_writer("r1", Stream::kStderr);
    out->append("hello ");
    err->append("warning: x\n");
    out->append("");
    out->append("world\n");
    out->close();
    err->close();
    out->close();  // idempotent
    EXPECT_THROW(out->append("late"), LogStoreError);
  }
  EXPECT_EQ(store.read_all("r1", Stream::kStdout), "hello world\n");
  EXPECT_EQ(store.read_all("r1", Stream::kStderr), "warning: x\n");

  struct stat st {};
  ASSERT_EQ(stat(store.path("r1", Stream::kStdout).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string raw = slurp(store.path("r1", Stream::kStdout));
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(raw[0]), 0x1f);  // gzip magic: `zcat` can read the logs too
  EXPECT_EQ(static_cast<unsigned char>(raw[1]), 0x8b);
}

TEST_F(LogStoreTest, DigestCoversEveryByteWrittenIncludingThoseTheCapDropped) {
  LogStore store(dir_, LogStoreOptions{64});
  auto out = store.open_writer("r1", Stream::kStdout);
  std::string written;
  for (int i = 0; i < 100; ++i) {
    const std::string piece = "line " + std::to_string(i) + "\n";
    out->append(piece);
    written += piece;
  }
  EXPECT_EQ(out->digest().sha256, "") << "known once closed";
  out->close();
  ASSERT_TRUE(store.truncation("r1", Stream::kStdout)) << "the cap dropped bytes";
  EXPECT_NE(store.read_all("r1", Stream::kStdout), written);
  EXPECT_EQ(out->digest().sha256, store::sha256_of(written).str());
  EXPECT_EQ(out->digest().bytes, written.size());

  auto silent = store.open_writer("r1", Stream::kStderr);
  silent->close();
  EXPECT_EQ(silent->digest().sha256, store::sha256_of("").str()) << "a silent stream has the empty digest";
  EXPECT_EQ(silent->digest().bytes, 0u);
}

TEST_F(LogStoreTest, ReadsWhatIsFlushedWhileTheRunIsStillWriting) {
  LogStore store(dir_);
  auto writer = store.open_writer("live", Stream::kStdout);
  EXPECT_EQ(store.read_all("live", Stream::kStdout), "");  // nothing written yet
  writer->append("line 1\n");
  EXPECT_EQ(store.read_all("live", Stream::kStdout), "line 1\n");
  std::string expected = "line 1\n";
  for (int i = 2; i <= 200; ++i) {
    const std::string line = "line " + std::to_string(i) + "\n";
    writer->append(line);
    expected += line;
  }
  EXPECT_EQ(store.read_all("live", Stream::kStdout), expected);
  writer->close();
  EXPECT_EQ(store.read_all("live", Stream::kStdout), expected);
}

TEST_F(LogStoreTest, LargeAndBinaryOutput) {
  LogStore store(dir_);
  std::mt19937 rng(7);
  std::string expected;
  {
    auto writer = store.open_writer("big", Stream::kStderr);
    for (int chunk = 0; chunk < 40; ++chunk) {
      std::string data(100000, '\0');
      // Half compressible text, half random bytes (including NULs).
      for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = i % 2 == 0 ? static_cast<char>('a' + i % 26) : static_cast<char>(rng() & 0xff);
      }
      writer->append(data);
      expected += data;
    }
  }  // the destructor finishes the stream
  EXPECT_EQ(store.read_all("big", Stream::kStderr), expected);
  EXPECT_LT(std::filesystem::file_size(store.path("big", Stream::kStderr)), expected.size());
}

TEST_F(LogStoreTest, ReopeningAWriterStartsOver) {
  LogStore store(dir_);
  store.open_writer("r", Stream::kStdout)->append("first attempt");
  ASSERT_EQ(chmod(store.path("r", Stream::kStdout).c_str(), 0644), 0);
  {
    auto writer = store.open_writer("r", Stream::kStdout);
    writer->append("second");
  }
  EXPECT_EQ(store.read_all("r", Stream::kStdout), "second");
  struct stat st {};
  ASSERT_EQ(stat(store.path("r", Stream::kStdout).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(LogStoreTest, ExistsAndRemove) {
  LogStore store(dir_);
  EXPECT_FALSE(store.exists("r", Stream::kStdout));
  store.open_writer("r", Stream::kStdout)->append("x");
  EXPECT_TRUE(store.exists("r", Stream::kStdout));
  EXPECT_FALSE(store.exists("r", Stream::kStderr));
  store.remove("r");  // stderr never existed: fine
  EXPECT_FALSE(store.exists("r", Stream::kStdout));
  store.remove("r");
}

TEST_F(LogStoreTest, ErrorsNameTheFile) {
  LogStore store(dir_);
  std::filesystem::create_symlink(dir_ + "/elsewhere", store.path("link", Stream::kStdout));
  try {
    store.read_all("link", Stream::kStdout);
    FAIL();
  } catch (const LogStoreError& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/link.stdout.z: open for reading"), std::string::npos) << e.what();
  }

  std::ofstream(store.path("corrupt", Stream::kStdout)) << "this is not a gzip stream at all";
  try {
    store.read_all("corrupt", Stream::kStdout);
    FAIL();
  } catch (const LogStoreError& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.stdout.z: corrupt log"), std::string::npos) << e.what();
  }

  for (const std::string bad : {"", "../escape", "a/b", ".hidden", "x y", "..", "id\n"}) {
    EXPECT_THROW(store.path(bad, Stream::kStdout), LogStoreError) << bad;
    EXPECT_THROW(store.open_writer(bad, Stream::kStdout), LogStoreError) << bad;
  }
  EXPECT_NO_THROW(store.path("2024-01-01_run.A-9", Stream::kStdout));
}

TEST_F(LogStoreTest, DoesNotWriteThroughASymlink) {
  LogStore store(dir_);
  const std::string target = dir_ + "/target";
  std::ofstream(target) << "keep";
  std::filesystem::create_symlink(target, store.path("link", Stream::kStdout));
  store.open_writer("link", Stream::kStdout)->append("log");  // the link is an earlier log: removed
  EXPECT_EQ(slurp(target), "keep");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(store.path("link", Stream::kStdout))));
  EXPECT_EQ(store.read_all("link", Stream::kStdout), "log");

  auto writer = store.open_writer("late", Stream::kStdout);
  std::filesystem::create_symlink(target, store.path("late", Stream::kStdout));  // planted after the opening
  EXPECT_THROW(writer->append("x"), LogStoreError);
  EXPECT_EQ(slurp(target), "keep");
}

}  // namespace
}  // namespace capsule::daemon

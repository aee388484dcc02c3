// Lazy log files: a stream that never gets a byte leaves no file, holds no descriptor, and reads exactly like an
// empty log everywhere (read_all, readers, sizes, notes, removal); a reader opened first picks the file up.
#include <gtest/gtest.h>

#include <filesystem>

#include "daemon/logs/log_store.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

class LazyLogFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-lazylogs-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::size_t files() const {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir_)) ++count;
    return count;
  }

  std::string dir_;
};

using capsule::testing::open_fds;

TEST_F(LazyLogFilesTest, AWriterThatGetsNoByteLeavesNoFileAndReadsAsEmpty) {
  LogStore store(dir_, LogStoreOptions{4096});
  const std::size_t fds_before = open_fds();
  auto out = store.open_writer("quiet", Stream::kStdout);
  auto err = store.open_writer("quiet", Stream::kStderr);
  out->append("");
  EXPECT_EQ(open_fds(), fds_before) << "no file is opened before the first byte";
  EXPECT_EQ(files(), 0u);
  out->close();
  err->close();
  EXPECT_THROW(out->append("late"), LogStoreError) << "closed is closed, file or not";
  EXPECT_EQ(files(), 0u);
  for (Stream stream : {Stream::kStdout, Stream::kStderr}) {
    EXPECT_FALSE(store.exists("quiet", stream));
    EXPECT_EQ(store.read_all("quiet", stream), "");
    auto reader = store.open_reader("quiet", stream);
    EXPECT_EQ(reader->read(), "");
    EXPECT_EQ(reader->position(), 0u);
    EXPECT_FALSE(store.truncation("quiet", stream).has_value());
  }
  EXPECT_EQ(store.disk_bytes("quiet"), 0u);
  store.remove("quiet");
  EXPECT_EQ(open_fds(), fds_before);
}

TEST_F(LazyLogFilesTest, OnlyTheStreamThatPrintedHasAFile) {
  LogStore store(dir_);
  {
    auto out = store.open_writer("r", Stream::kStdout);
    auto err = store.open_writer("r", Stream::kStderr);
    err->append("oops\n");
  }
  EXPECT_FALSE(store.exists("r", Stream::kStdout));
  EXPECT_TRUE(store.exists("r", Stream::kStderr));
  EXPECT_EQ(files(), 1u);
  EXPECT_EQ(store.read_all("r", Stream::kStderr), "oops\n");
  EXPECT_EQ(store.read_all("r", Stream::kStdout), "");
  EXPECT_EQ(store.disk_bytes("r"), std::filesystem::file_size(store.path("r", Stream::kStderr)));
}

TEST_F(LazyLogFilesTest, AWriterStartsOverEvenWhenItWritesNothing) {
  LogStore store(dir_, LogStoreOptions{64});
  store.open_writer("r", Stream::kStdout)->append(std::string(1000, 'x'));  // past the cap: a note too
  ASSERT_TRUE(store.truncation("r", Stream::kStdout).has_value());
  store.open_writer("r", Stream::kStdout)->close();
  EXPECT_EQ(store.read_all("r", Stream::kStdout), "") << "the earlier log does not pass for this one";
  EXPECT_FALSE(store.truncation("r", Stream::kStdout).has_value());
  EXPECT_EQ(files(), 0u);
}

TEST_F(LazyLogFilesTest, AReaderOpenedBeforeTheFirstBytePicksTheFileUp) {
  LogStore store(dir_);
  auto writer = store.open_writer("r", Stream::kStdout);
  auto reader = store.open_reader("r", Stream::kStdout);
  EXPECT_EQ(reader->read(), "");
  EXPECT_FALSE(reader->finished());
  writer->append("first\n");
  EXPECT_EQ(reader->read(), "first\n");
  writer->append("second\n");
  writer->close();
  EXPECT_EQ(reader->read(), "second\n");
  EXPECT_TRUE(reader->finished());
}

}  // namespace
}  // namespace capsule::daemon

// PublishTimes: the first stored time of a coordinate wins forever, across threads, connections and reopening.
#include "http/error_status.h"
#include "proxy/cache/publish_times.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include "proxy/error.h"

namespace capsule::proxy {
namespace {

class PublishTimesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "publish-times-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path db() const { return dir_ / "publish-times.sqlite"; }

  std::filesystem::path dir_;
};

TEST_F(PublishTimesTest, FirstTimeWins) {
  PublishTimes times(db());
  EXPECT_EQ(times.get("org.example:demo:1.0"), std::nullopt);
  EXPECT_EQ(times.put_once("org.example:demo:1.0", 1000, "last-modified"), 1000);
  EXPECT_EQ(times.put_once("org.example:demo:1.0", 2000, "later answer"), 1000);
  EXPECT_EQ(times.get("org.example:demo:1.0"), 1000);
  EXPECT_EQ(times.get("org.example:demo:1.1"), std::nullopt);
  EXPECT_EQ(times.put_once("org.example:demo:0.9", -5, "before the epoch"), -5);
  EXPECT_EQ(times.get("org.example:demo:0.9"), -5);
}

TEST_F(PublishTimesTest, SurvivesReopen) {
  {
    PublishTimes times(db());
    times.put_once("g:a:1", 1681171200000000, "file");
  }
  PublishTimes reopened(db());
  EXPECT_EQ(reopened.get("g:a:1"), 1681171200000000);
  EXPECT_EQ(reopened.put_once("g:a:1", 1, "other"), 1681171200000000);
}

TEST_F(PublishTimesTest, TwoConnectionsAgree) {
  PublishTimes first(db());
  PublishTimes second(db());
  EXPECT_EQ(first.put_once("g:a:2", 42, "first"), 42);
  EXPECT_EQ(second.put_once("g:a:2", 43, "second"), 42);
  EXPECT_EQ(second.get("g:a:2"), 42);
}

TEST_F(PublishTimesTest, ConcurrentWritersAllSeeOneValue) {
  PublishTimes times(db());
  constexpr int kThreads = 8;
  std::vector<Micros> returned(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { returned[static_cast<std::size_t>(i)] = times.put_once("g:a:3", 100 + i, "race"); });
  }
  for (auto& thread : threads) thread.join();
  const std::optional<Micros> stored = times.get("g:a:3");
  ASSERT_TRUE(stored);
  EXPECT_GE(*stored, 100);
  EXPECT_LT(*stored, 100 + kThreads);
  for (Micros value : returned) EXPECT_EQ(value, *stored);
}

TEST_F(PublishTimesTest, UnopenablePathNamesTheFile) {
  const std::filesystem::path missing = dir_ / "no-such-dir" / "times.sqlite";
  try {
    PublishTimes times(missing);
    FAIL() << "opened a database in a missing directory";
  } catch (const ProxyError& e) {
    EXPECT_EQ(capsule::http::status_for(e.code()), 500u);
    EXPECT_EQ(e.code(), "cache_failure");
    EXPECT_EQ(e.cause().path, missing.string());
  }
}

}  // namespace
}  // namespace capsule::proxy

// The end of a run reaching its log followers: the ledger tells its finished observer once a run's final row is
// committed (not for a refused transition), and LogStore::run_ended passes it to both streams' watchers.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

class LogRunEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-runend-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

TEST_F(LogRunEndTest, TheLedgerTellsItsObserverOnceTheFinalRowIsCommitted) {
  Ledger ledger(dir_ + "/ledger.db");
  std::vector<std::string> states_seen;
  ledger.set_finished_observer([&](const std::string& id) { states_seen.push_back(id + " " + ledger.get(id)->state); });
  ledger.insert_queued("a", json::object(), json::object(), {}, 0, 0, 1);
  ledger.mark_running("a", 2);
  EXPECT_TRUE(states_seen.empty()) << "running is not the end";
  ledger.mark_finished("a", "succeeded", json::object(), 3);
  EXPECT_EQ(states_seen, std::vector<std::string>{"a succeeded"});
  EXPECT_ANY_THROW(ledger.mark_finished("a", "failed", json::object(), 4));
  EXPECT_ANY_THROW(ledger.mark_finished("unknown", "failed", json::object(), 4));
  EXPECT_EQ(states_seen.size(), 1u) << "a refused transition is no end";
}

TEST_F(LogRunEndTest, RunEndedSignalsBothStreamsOfThatRunOnly) {
  LogStore store(dir_ + "/logs");
  std::vector<LogEvent> out_events, err_events, other_events;
  auto out = store.watch("r", Stream::kStdout, [&](LogEvent event) { out_events.push_back(event); });
  auto err = store.watch("r", Stream::kStderr, [&](LogEvent event) { err_events.push_back(event); });
  auto other = store.watch("other", Stream::kStdout, [&](LogEvent event) { other_events.push_back(event); });
  {
    auto writer = store.open_writer("r", Stream::kStdout);
    writer->append("x");
  }  // closed: written twice
  store.run_ended("r");
  EXPECT_EQ(out_events, (std::vector<LogEvent>{LogEvent::kWritten, LogEvent::kWritten, LogEvent::kRunEnded}));
  EXPECT_EQ(err_events, std::vector<LogEvent>{LogEvent::kRunEnded}) << "a stream with no output hears the end too";
  EXPECT_TRUE(other_events.empty());
  store.run_ended("../not an id");  // ignored, never thrown
}

}  // namespace
}  // namespace capsule::daemon

// Retention: the plan (age first, then size, oldest finished first, stopping at the first run to keep) and
// its application on a real ledger and log store, which never touches queued or running runs.
#include "daemon/logs/retention.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace capsule::daemon {
namespace {

using nlohmann::json;
constexpr std::int64_t kDay = 24ll * 3600 * 1000;

TEST(RetentionPlan, RemovesByAgeThenOldestFirstBySize) {
  const std::int64_t now = 100 * kDay;
  const std::vector<RetentionCandidate> runs = {
      {"a", 80 * kDay, 100}, {"b", 85 * kDay, 100}, {"c", 95 * kDay, 100}, {"d", 99 * kDay, 100}};
  EXPECT_EQ(plan_retention(runs, 400, RetentionPolicy{}, now), std::vector<std::string>{}) << "disabled";
  EXPECT_EQ(plan_retention(runs, 400, RetentionPolicy{10, 0}, now), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plan_retention(runs, 400, RetentionPolicy{0, 250}, now), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(plan_retention(runs, 400, RetentionPolicy{0, 400}, now), std::vector<std::string>{}) << "fits";
  EXPECT_EQ(plan_retention(runs, 400, RetentionPolicy{0, 399}, now), std::vector<std::string>{"a"});
  // Live runs count in the total (1000 of 1400) but are no candidates: every finished run goes, no more.
  EXPECT_EQ(plan_retention(runs, 1400, RetentionPolicy{0, 500}, now), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(plan_retention(runs, 400, RetentionPolicy{3, 350}, now), (std::vector<std::string>{"a", "b", "c"}));
}

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-retention-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RetentionTest, AppliesToFinishedRunsOnlyOldestFirst) {
  Ledger ledger(dir_ + "/ledger.db");
  LogStore logs(dir_ + "/logs");
  auto finished = [&](const std::string& id, std::int64_t at, std::size_t log_bytes) {
    ledger.insert_queued(id, json::object(), json::object(), {}, 0, 0, at - 10);
    ledger.mark_running(id, at - 5);
    logs.open_writer(id, Stream::kStdout)->append(std::string(log_bytes, 'x'));
    ledger.mark_finished(id, "succeeded", json{{"status", "succeeded"}}, at);
  };
  const std::int64_t now = 100 * kDay;
  finished("old", 10 * kDay, 10);
  finished("big", 98 * kDay, 0);
  finished("new", 99 * kDay, 10);
  ledger.insert_queued("queued", json::object(), json::object(), {}, 0, 0, 1);  // older than all, but live
  ledger.insert_queued("running", json::object(), json::object(), {}, 0, 0, 2);
  ledger.mark_running("running", 3);
  auto live_log = logs.open_writer("running", Stream::kStdout);
  live_log->append("still writing");
  // "big" gets a large incompressible log so the size limit has something to remove.
  {
    auto writer = logs.open_writer("big", Stream::kStdout);
    std::string noise(200'000, '\0');
    unsigned seed = 1;
    for (auto& c : noise) c = static_cast<char>((seed = seed * 1103515245 + 12345) >> 16);
    writer->append(noise);
  }

  RetentionReport report = apply_retention(ledger, logs, RetentionPolicy{30, 0}, now);
  EXPECT_EQ(report.removed, 1u);
  EXPECT_FALSE(ledger.get("old").has_value());
  EXPECT_FALSE(logs.exists("old", Stream::kStdout));
  EXPECT_TRUE(ledger.get("big").has_value());

  report = apply_retention(ledger, logs, RetentionPolicy{0, 100'000}, now);
  EXPECT_EQ(report.removed, 1u) << "the oldest finished run alone brings the total under the limit";
  EXPECT_FALSE(ledger.get("big").has_value());
  EXPECT_TRUE(ledger.get("new").has_value());

  report = apply_retention(ledger, logs, RetentionPolicy{0, 1}, now);
  EXPECT_EQ(report.removed, 1u) << "every finished run, never a live one";
  EXPECT_FALSE(ledger.get("new").has_value());
  EXPECT_EQ(ledger.get("queued")->state, "queued");
  EXPECT_EQ(ledger.get("running")->state, "running");
  live_log->append(" and more");
  live_log->close();
  EXPECT_EQ(logs.read_all("running", Stream::kStdout), "still writing and more");
}

TEST_F(RetentionTest, LedgerRemovesOnlyFinishedRuns) {
  Ledger ledger(dir_ + "/ledger.db");
  ledger.insert_queued("q", json::object(), json::object(), {}, 0, 0, 1);
  ledger.insert_queued("done", json{{"argv", {"x"}}}, json::object(), {{"k", "v"}}, 0, 0, 2);
  ledger.mark_running("done", 3);
  ledger.mark_finished("done", "failed", json{{"status", "failed"}}, 4);
  EXPECT_EQ(ledger.finished_runs_oldest_first().size(), 1u);
  EXPECT_GT(ledger.finished_runs_oldest_first()[0].record_bytes, 0u);
  EXPECT_GT(ledger.record_bytes_total(), ledger.finished_runs_oldest_first()[0].record_bytes);
  EXPECT_EQ(ledger.remove_finished("q"), Ledger::Removal::kActive);
  EXPECT_EQ(ledger.remove_finished("nope"), Ledger::Removal::kUnknown);
  EXPECT_EQ(ledger.remove_finished("done"), Ledger::Removal::kRemoved);
  EXPECT_EQ(ledger.remove_finished("done"), Ledger::Removal::kUnknown);
  EXPECT_TRUE(ledger.get("q").has_value());
  EXPECT_EQ(ledger.count_by_state()["failed"], 0u);
}

}  // namespace
}  // namespace capsule::daemon

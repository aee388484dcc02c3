// RunManager directly, with real boxes: where a run is started (a box waiting in the pool on the supervision
// loop, a box to be made on a start thread) and that runs started on several threads are each recorded once.
#include "daemon/runs/run_manager.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <map>
#include <optional>

#include "images/host_image.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string this_thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof name);
  return name;
}

// What a run's listener saw: each event's name with the thread it came on, and the finished run object.
struct Seen {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::string>> events;  // event, thread name
  std::promise<json> finished;

  RunManager::Listener listener() {
    return [this](const json& event) {
      const std::string name = event.value("event", "");
      {
        std::lock_guard lock(mutex);
        events.emplace_back(name, this_thread_name());
      }
      if (name == "finished") finished.set_value(event["run"]);
    };
  }
  std::string thread_of(const std::string& event) {
    std::lock_guard lock(mutex);
    for (const auto& [name, thread] : events) {
      if (name == event) return thread;
    }
    return "";
  }
  std::vector<std::string> names() {
    std::lock_guard lock(mutex);
    std::vector<std::string> out;
    for (const auto& [name, thread] : events) {
      if (out.empty() || out.back() != name) out.push_back(name);
    }
    return out;
  }
};

class RunManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/capsule-test/run-manager-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ledger_ = std::make_unique<Ledger>(":memory:");
    logs_ = std::make_unique<LogStore>(dir_ + "/logs");
  }
  void TearDown() override {
    runs_.reset();
    if (launcher_) launcher_->remove_cgroup_parent();
    launcher_.reset();
    fs::remove_all(dir_);
  }

  // A launcher of this test's own (scratch dir, cgroup parent) with `pool_boxes` made ahead per environment.
  void start_manager(std::size_t pool_boxes, std::size_t max_concurrent) {
    sandbox::LauncherOptions launcher_options;
    launcher_options.scratch_dir = dir_ + "/scratch";
    launcher_options.cgroup.parent = testing::shared_cgroup_parent() + "-runs";
    launcher_options.pool.boxes_per_environment = pool_boxes;
    launcher_.emplace(launcher_options);
    RunManagerOptions options;
    options.max_concurrent = max_concurrent;
    options.runs_dir = dir_ + "/runs";
    options.images_dir = dir_ + "/images";
    options.policies_dir = std::string(CAPSULE_SOURCE_DIR) + "/policies";
    images::prepare_host_image(options.images_dir);
    runs_ = std::make_unique<RunManager>(*launcher_, *ledger_, *logs_, options);
  }

  std::string submit(const std::vector<std::string>& argv, Seen& seen) {
    Submission submission;
    submission.spec = spec::parse_run_spec({{"argv", argv}}, spec::default_limit_policy());
    return runs_->submit(submission, Peer{0, ::getpid()}, seen.listener());
  }

  std::string dir_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<LogStore> logs_;
  std::optional<sandbox::Launcher> launcher_;
  std::unique_ptr<RunManager> runs_;
};

TEST_F(RunManagerTest, ABoxToBeMadeIsMadeOnAStartThreadAndAWaitingOneTakenByTheLoop) {
  start_manager(/*pool_boxes=*/1, /*max_concurrent=*/4);
  Seen cold;
  submit({"true"}, cold);
  ASSERT_EQ(cold.finished.get_future().get()["state"], "succeeded");
  EXPECT_EQ(cold.thread_of("started"), "run-start") << "no box was waiting: it is made off the supervision loop";

  // The first run made the environment wanted: a box of it is made ahead.
  for (int i = 0; i < 500 && launcher_->pool_stats().made == 0; ++i) usleep(10 * 1000);
  ASSERT_GE(launcher_->pool_stats().made, 1u);
  Seen warm;
  submit({"true"}, warm);
  ASSERT_EQ(warm.finished.get_future().get()["state"], "succeeded");
  EXPECT_EQ(warm.thread_of("started"), "run-supervise") << "a waiting box costs the loop an exec, not a hop";
  EXPECT_EQ(launcher_->pool_stats().hits, 1u);
}

TEST_F(RunManagerTest, RunsStartedOnSeveralThreadsAreEachStartedAndRecordedOnce) {
  start_manager(/*pool_boxes=*/0, /*max_concurrent=*/8);
  constexpr int kRuns = 12;
  std::map<std::string, Seen> seen;
  std::vector<std::string> ids;
  for (int i = 0; i < kRuns; ++i) {
    std::string tag = "run-" + std::to_string(i);
    ids.push_back(submit({"/bin/sh", "-c", "echo " + tag}, seen[tag]));
  }
  for (int i = 0; i < kRuns; ++i) {
    Seen& run = seen["run-" + std::to_string(i)];
    const json finished = run.finished.get_future().get();
    EXPECT_EQ(finished["state"], "succeeded") << finished.dump();
    const std::vector<std::string> expected{"queued", "started", "stdout", "finished"};
    EXPECT_EQ(run.names(), expected) << "each event once, in order";
    EXPECT_EQ(run.thread_of("started"), "run-start");
    const std::optional<RunRow> row = ledger_->get(ids[i]);
    ASSERT_TRUE(row);
    EXPECT_EQ(row->state, "succeeded");
    EXPECT_TRUE(row->started_ms.has_value());
  }
  const RunStats stats = runs_->stats();
  EXPECT_EQ(stats.finished_by_status.at("succeeded"), static_cast<std::uint64_t>(kRuns));
  EXPECT_EQ(stats.active, 0u);
}

TEST_F(RunManagerTest, ManagerGoneWhileRunsStartLeavesEveryRunRecordedAndNoBoxBehind) {
  start_manager(/*pool_boxes=*/0, /*max_concurrent=*/8);
  std::vector<std::string> ids;
  std::map<int, Seen> seen;
  for (int i = 0; i < 8; ++i) ids.push_back(submit({"sleep", "30"}, seen[i]));
  runs_.reset();  // cancels what is queued, starting or running, and waits for each to be recorded
  for (const std::string& id : ids) {
    const std::optional<RunRow> row = ledger_->get(id);
    ASSERT_TRUE(row);
    EXPECT_EQ(row->state, "cancelled") << id;
  }
  launcher_->drain_teardown();
  std::error_code ec;
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir_ + "/scratch", ec)) {
    const std::string name = entry.path().filename();
    if (!name.starts_with(".")) left.push_back(name);  // .disk-templates: the launcher's, kept for the next disk
  }
  EXPECT_TRUE(left.empty()) << "no box left behind: " << ::testing::PrintToString(left);
  if (launcher_->cgroup_version() == 1) {
    std::vector<std::string> groups;
    const std::string parent = "/sys/fs/cgroup/memory/" + testing::shared_cgroup_parent() + "-runs";
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
      if (entry.is_directory()) groups.push_back(entry.path().filename());
    }
    EXPECT_TRUE(groups.empty()) << "no box's cgroup left behind: " << ::testing::PrintToString(groups);
  }
}

}  // namespace
}  // namespace capsule::daemon

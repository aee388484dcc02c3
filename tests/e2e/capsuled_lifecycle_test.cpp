// Integration tests of capsuled's run lifecycle against a real daemon process: a full queue, many clients at
// once, restart after kill -9, copy-on-write / read-only / read-write workspaces, JUnit counts, SIGTERM drain.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

// ---------------------------------------------------------------------------------------------------------
// A full queue is refused with 429.

TEST_F(Capsuled, FullQueueAnswers429) {
  start({"--max-concurrent", "1", "--max-queue", "1"});
  std::vector<std::string> accepted;
  HttpResponse refused;
  for (int i = 0; i < 10; ++i) {
    HttpResponse response = call("POST", "/v1/runs", json{{"argv", {"sleep", "60"}}});
    if (response.status != 202) {
      refused = response;
      break;
    }
    accepted.push_back(body_json(response)["id"]);
  }
  expect_error(refused, 429, "queue_full", "queue is full");
  EXPECT_EQ(accepted.size(), 2u) << "one running and one waiting";
  EXPECT_TRUE(eventually([&] {
    const json h = health();
    return h["active"] == 1 && h["queued"] == 1;
  })) << health();
  EXPECT_EQ(call("POST", "/v1/runs", json{{"argv", {"sleep", "60"}}}).status, 429) << "still full";
  ASSERT_TRUE(eventually([&] { return sandbox_processes("sleep").size() == 1; })) << "the first run never started";

  for (const auto& id : accepted) EXPECT_EQ(call("POST", "/v1/runs/" + id + "/cancel").status, 202);
  for (const auto& id : accepted) EXPECT_EQ(wait_finished(id)["state"], "cancelled");
  EXPECT_EQ(health()["queued"], 0);
  EXPECT_EQ(run_and_wait(sh("true"))["state"], "succeeded") << "room again once the queue drained";
}

// ---------------------------------------------------------------------------------------------------------
// Many clients at once.

TEST_F(Capsuled, ThirtyTwoConcurrentClientsEachGetTheirOwnOutput) {
  start();
  constexpr int kClients = 32;
  std::vector<std::string> problems(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      try {
        const json spec = {{"argv", {"sh", "-c", "echo $I"}}, {"env", {{"I", std::to_string(i)}}}};
        const HttpResponse response = call("POST", "/v1/runs?wait=true", spec);
        const json run = json::parse(response.body, nullptr, false);
        if (response.status != 200) {
          problems[i] = "status " + std::to_string(response.status) + ": " + response.body;
        } else if (run.is_discarded() || run["state"] != "succeeded" ||
                   run["result"]["stdout"]["head"] != std::to_string(i) + "\n") {
          problems[i] = "unexpected run: " + response.body;
        }
      } catch (const std::exception& e) {
        problems[i] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(problems[i], "") << "client " << i;
  EXPECT_EQ(list("?state=succeeded&limit=100").size(), kClients);
}

// ---------------------------------------------------------------------------------------------------------
// Restart after kill -9: unfinished runs become interrupted, their sandboxes are cleaned away.

TEST_F(Capsuled, RestartAfterKill9InterruptsUnfinishedRunsAndRemovesTheirSandboxes) {
  start({"--max-concurrent", "2"});
  const json done = run_and_wait(sh("echo before the crash"));
  ASSERT_EQ(done["state"], "succeeded");
  std::vector<std::string> sleeping;
  for (int i = 0; i < 4; ++i) sleeping.push_back(submit(json{{"argv", {"sleep", "300"}}}));
  ASSERT_TRUE(eventually([&] { return sandbox_processes("sleep").size() == 2; })) << "two sleeps should run";
  EXPECT_EQ(health()["queued"], 2);
  std::vector<ProcessInfo> old_processes = processes_in_cgroups_of(parent_);
  std::set<std::string> old_states;
  for (const auto& id : sleeping) old_states.insert(get_run(id)["state"]);
  EXPECT_EQ(old_states, (std::set<std::string>{"running", "queued"}));

  kill9();
  std::size_t survivors = 0;
  for (const auto& process : old_processes) survivors += still_running(process) ? 1 : 0;
  // Sandboxes outlive a crashed daemon (nothing kills them but the next daemon); noted, not required.
  RecordProperty("sandbox_processes_alive_after_kill9", std::to_string(survivors) + " of " +
                                                            std::to_string(old_processes.size()));

  restart();
  for (const auto& id : sleeping) {
    const json run = get_run(id);
    EXPECT_EQ(run["state"], "interrupted") << run;
    EXPECT_NE(run["result"].value("reason", "").find("daemon restarted"), std::string::npos) << run;
    EXPECT_TRUE(run["times"]["finished"].is_number()) << run;
  }
  EXPECT_EQ(get_run(done["id"]), done) << "a run finished before the crash keeps its record";
  for (const fs::path& dir : cgroup_parent_dirs(parent_)) {
    EXPECT_EQ(subdirectories(dir), std::vector<std::string>{}) << "sandbox cgroups left in " << dir;
  }
  for (const auto& process : old_processes) {
    EXPECT_FALSE(still_running(process)) << "process " << process.pid << " (" << process.comm
                                         << ") of a sandbox survived the restart";
  }
  EXPECT_TRUE(processes_in_cgroups_of(parent_).empty());
  EXPECT_EQ(mounts_below(dir_), std::vector<std::string>{(state_ / "scratch").string()})
      << "only the running daemon's own scratch tmpfs: no disk or bind of a killed run's sandbox";
  EXPECT_EQ(list("?state=interrupted").size(), 4u);
  EXPECT_NE(call("GET", "/metrics").body.find("capsule_runs{state=\"interrupted\"} 4\n"), std::string::npos);
  EXPECT_EQ(health(), json::parse(R"({"status": "ok", "active": 0, "queued": 0, "draining": false})"));
  EXPECT_EQ(run_and_wait(sh("echo after"))["result"]["stdout"]["head"], "after\n") << "the restarted daemon runs";
}

// ---------------------------------------------------------------------------------------------------------
// Workspaces: copy-on-write (default), read-only, read-write.

TEST_F(Capsuled, CowWorkspaceLeavesTheHostUntouchedAndReportsTheDiff) {
  start();
  const fs::path workspace = make_dir("project");
  fs::create_directories(workspace / "src");
  write_file(workspace / "src/keep.txt", "unchanged\n");
  write_file(workspace / "src/edit.txt", "old\n");
  write_file(workspace / "gone.txt", "delete me\n");
  const auto before = snapshot_tree(workspace);

  json spec = sh("cat src/keep.txt && printf 'new content\\n' > src/edit.txt && printf 'added\\n' > added.txt && "
                 "rm gone.txt && pwd");
  spec["workspace"] = {{"path", workspace.string()}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run;
  EXPECT_EQ(run["result"]["stdout"]["head"], "unchanged\n/workspace\n");
  EXPECT_EQ(run["spec"]["workspace"], json({{"path", workspace.string()}, {"mode", "cow"}}));
  EXPECT_EQ(run["spec"]["workspace"]["path"], workspace.string());
  EXPECT_EQ(run["diff"], json::parse(R"({
    "added": [{"path": "added.txt", "size": 6}],
    "modified": [{"path": "src/edit.txt", "size": 12}],
    "deleted": [{"path": "gone.txt", "size": 10}],
    "truncated": false,
    "totals": {"added": 1, "modified": 1, "deleted": 1}
  })"));
  EXPECT_EQ(snapshot_tree(workspace), before) << "the host directory changed";
}

TEST_F(Capsuled, ReadOnlyWorkspaceRefusesWrites) {
  start();
  const fs::path workspace = make_dir("ro");
  write_file(workspace / "file.txt", "original\n");
  const auto before = snapshot_tree(workspace);
  json spec = sh("cat file.txt; echo changed > file.txt");
  spec["workspace"] = {{"path", workspace.string()}, {"mode", "ro"}};
  const json run = run_and_wait(spec);
  EXPECT_EQ(run["state"], "failed") << run;
  EXPECT_EQ(run["result"]["stdout"]["head"], "original\n");
  EXPECT_NE(run["result"]["stderr"]["head"].get<std::string>().find("Read-only file system"), std::string::npos)
      << run["result"]["stderr"];
  EXPECT_TRUE(run["diff"].is_null());
  EXPECT_EQ(snapshot_tree(workspace), before);
}

TEST_F(Capsuled, ReadWriteWorkspaceWritesLandOnTheHost) {
  start();
  // Sandbox root writes as the directory's owner; a root-owned directory would stay read-only (by design).
  constexpr uid_t kOwner = 1000;
  const fs::path workspace = make_dir("rw");
  write_file(workspace / "file.txt", "original\n");
  write_file(workspace / "gone.txt", "x\n");
  for (const fs::path& path : {workspace, workspace / "file.txt", workspace / "gone.txt"}) {
    ASSERT_EQ(::chown(path.c_str(), kOwner, kOwner), 0) << path;
  }
  json spec = sh("echo changed > file.txt && echo new > new.txt && rm gone.txt");
  spec["workspace"] = {{"path", workspace.string()}, {"mode", "rw"}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run;
  EXPECT_EQ(slurp(workspace / "file.txt"), "changed\n");
  EXPECT_EQ(slurp(workspace / "new.txt"), "new\n");
  EXPECT_FALSE(fs::exists(workspace / "gone.txt"));
  struct stat st {};
  ASSERT_EQ(::stat((workspace / "new.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kOwner) << "new files belong to the directory's owner";
  EXPECT_TRUE(run["diff"].is_null());
}

// ---------------------------------------------------------------------------------------------------------
// JUnit reports written by the run are counted into record.tests.

TEST_F(Capsuled, JunitReportsFromSurefireAndPytestAreCounted) {
  start();
  const fs::path workspace = make_dir("tests");
  const std::string surefire = R"(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.example.FooTest" time="0.12" tests="5" errors="1" skipped="1" failures="1">
  <properties><property name="java.version" value="17.0.9"/></properties>
  <testcase name="a" classname="com.example.FooTest" time="0.01"/>
  <testcase name="b" classname="com.example.FooTest" time="0.01"/>
  <testcase name="c" classname="com.example.FooTest" time="0.01">
    <failure message="expected 1" type="java.lang.AssertionError">boom</failure>
  </testcase>
  <testcase name="d" classname="com.example.FooTest" time="0.01">
    <error message="npe" type="java.lang.NullPointerException">trace</error>
  </testcase>
  <testcase name="e" classname="com.example.FooTest" time="0"><skipped/></testcase>
</testsuite>
)";
  const std::string pytest = R"(<?xml version="1.0" encoding="utf-8"?><testsuites>
<testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="0.051" hostname="capsule">
<testcase classname="tests.test_x" name="test_a" time="0.001" />
<testcase classname="tests.test_x" name="test_b" time="0.001" />
<testcase classname="tests.test_x" name="test_c" time="0.002">
<failure message="assert 1 == 2">def test_c(): assert 1 == 2</failure></testcase>
<testcase classname="tests.test_x" name="test_d" time="0.000">
<skipped type="pytest.skip" message="later">skipped</skipped></testcase>
</testsuite></testsuites>
)";
  json spec = sh("mkdir -p target/surefire-reports build/py && "
                 "cat > target/surefire-reports/TEST-com.example.FooTest.xml <<'EOF'\n" + surefire + "EOF\n"
                 "cat > build/py/pytest-results.xml <<'EOF'\n" + pytest + "EOF\n"
                 "echo not a report > target/surefire-reports/notes.txt");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["collect"] = {{"junit", {"target/surefire-reports/TEST-*.xml", "**/pytest-results.xml"}}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run;
  const json& tests = run["tests"];
  EXPECT_EQ(tests["total"], 9) << tests;
  EXPECT_EQ(tests["failed"], 2) << tests;
  EXPECT_EQ(tests["errors"], 1) << tests;
  EXPECT_EQ(tests["skipped"], 2) << tests;
  EXPECT_EQ(tests["files"],
            json({"build/py/pytest-results.xml", "target/surefire-reports/TEST-com.example.FooTest.xml"}));
  EXPECT_EQ(tests["unreadable"], json::array());
  EXPECT_FALSE(run.contains("collect_error")) << run["result"];
  EXPECT_TRUE(fs::is_empty(workspace)) << "cow: the reports stay out of the host directory";
}

// ---------------------------------------------------------------------------------------------------------
// SIGTERM drains: no new runs, runs in flight finish or are cancelled, and the ledger keeps them all.

TEST_F(Capsuled, SigtermDrainsRefusesNewRunsAndRecordsRunsInFlight) {
  start({"--drain-grace-ms", "5000"});
  struct Waiter {
    std::thread thread;
    HttpResponse response;
    std::string error;
  };
  auto launch = [&](Waiter& waiter, const json& spec) {
    waiter.thread = std::thread([&, spec] {
      try {
        waiter.response = call("POST", "/v1/runs?wait=true", spec);
      } catch (const std::exception& e) {
        waiter.error = e.what();
      }
    });
  };
  // The quick run ends when the test creates `go` (during the drain); the slow one outlives the grace period.
  const fs::path workspace = make_dir("drain");
  Waiter quick, slow;
  json quick_spec = sh("while [ ! -e /workspace/go ]; do sleep 0.05; done; echo finished in time");
  quick_spec["workspace"] = {{"path", workspace.string()}, {"mode", "ro"}};
  quick_spec["labels"] = {{"which", "quick"}};
  json slow_spec = json{{"argv", {"sleep", "60"}}, {"labels", {{"which", "slow"}}}};
  launch(quick, quick_spec);
  launch(slow, slow_spec);
  ASSERT_TRUE(eventually([&] { return list("?state=running").size() == 2; })) << "both runs should be running";

  ::kill(daemon_, SIGTERM);
  ASSERT_TRUE(eventually([&] {
    try {
      return health().value("draining", false);
    } catch (const std::exception&) {
      return false;
    }
  })) << "health never reported draining";
  expect_error(call("POST", "/v1/runs", sh("true")), 503, "draining", "shutting down");
  write_file(workspace / "go", "");

  const int code = wait_daemon_exit();
  EXPECT_EQ(code, 0);
  quick.thread.join();
  slow.thread.join();
  // The clients waiting on runs in flight get their answers before the daemon goes.
  EXPECT_EQ(quick.error, "");
  EXPECT_EQ(quick.response.status, 200) << quick.response.body;
  EXPECT_EQ(slow.error, "");
  EXPECT_EQ(slow.response.status, 200) << slow.response.body;

  restart();
  const json quick_runs = list("?label=which=quick");
  const json slow_runs = list("?label=which=slow");
  ASSERT_EQ(quick_runs.size(), 1u) << quick_runs;
  ASSERT_EQ(slow_runs.size(), 1u) << slow_runs;
  EXPECT_EQ(quick_runs[0]["state"], "succeeded");
  EXPECT_EQ(quick_runs[0]["result"]["stdout"]["head"], "finished in time\n");
  EXPECT_EQ(slow_runs[0]["state"], "cancelled");
  EXPECT_EQ(list().size(), 2u) << "the refused run was not recorded";
  if (quick.response.status == 200) {
    EXPECT_EQ(body_json(quick.response), quick_runs[0]);
  }
  if (slow.response.status == 200) {
    EXPECT_EQ(body_json(slow.response), slow_runs[0]);
  }
}

}  // namespace
}  // namespace capsule::testing

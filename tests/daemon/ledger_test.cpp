// Ledger: schema and persistence, state transitions, newest-first keyset pagination, state and label
// filters (with hostile-looking labels), restart recovery, counts and concurrent writers.
#include "daemon/ledger.h"

#include "spec/run_spec.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

namespace capsule::daemon {
namespace {

using nlohmann::json;

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-ledger-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    db_ = dir_ + "/ledger.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::string db_;
};

std::string run_id(int i) {
  char id[32];
  std::snprintf(id, sizeof id, "run-%04d", i);
  return id;
}

TEST_F(LedgerTest, PersistsAcrossReopen) {
  {
    Ledger ledger(db_);
    ledger.insert_queued("a", json{{"argv", {"true"}}}, json::object(), {{"suite", "x"}}, 1000, 42, 100);
    ledger.mark_running("a", 110);
    ledger.mark_finished("a", "succeeded", json{{"result", {{"exit_code", 0}}}}, 150);
    ledger.insert_queued("b", json::object(), json::object(), {}, 0, 1, 200);
  }
  Ledger ledger(db_);
  auto a = ledger.get("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, "succeeded");
  EXPECT_EQ(a->created_ms, 100);
  EXPECT_EQ(a->started_ms, 110);
  EXPECT_EQ(a->finished_ms, 150);
  EXPECT_EQ(a->labels, json({{"suite", "x"}}));
  EXPECT_EQ(a->spec, json({{"argv", {"true"}}}));
  ASSERT_TRUE(a->outcome);
  EXPECT_EQ((*a->outcome)["result"]["exit_code"], 0);
  EXPECT_EQ(a->peer_uid, 1000u);
  EXPECT_EQ(a->peer_pid, 42);

  auto b = ledger.get("b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->state, "queued");
  EXPECT_FALSE(b->started_ms);
  EXPECT_FALSE(b->outcome);
  EXPECT_FALSE(ledger.get("nope"));
}

TEST_F(LedgerTest, UsesWalSchemaVersionAndPrivateFile) {
  { Ledger ledger(db_); }
  struct stat st {};
  ASSERT_EQ(stat(db_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  auto pragma = [&](const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(stmt), SQLITE_ROW);
    std::string value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return value;
  };
  EXPECT_EQ(pragma("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(pragma("PRAGMA user_version"), std::to_string(Ledger::kSchemaVersion));
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  try {
    Ledger newer(db_);
    FAIL() << "a newer schema must be refused";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(db_), std::string::npos) << e.what();
  }
}

TEST_F(LedgerTest, OpenErrorNamesThePath) {
  try {
    Ledger ledger(dir_ + "/missing/ledger.db");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/missing/ledger.db"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
}

TEST_F(LedgerTest, TransitionsAreChecked) {
  Ledger ledger(db_);
  ledger.insert_queued("a", json::object(), json::object(), {}, 0, 0, 1);
  EXPECT_THROW(ledger.insert_queued("a", json::object(), json::object(), {}, 0, 0, 2), base::Error);  // duplicate id
  EXPECT_THROW(ledger.mark_running("zzz", 5), base::Error);
  EXPECT_THROW(ledger.mark_finished("a", "running", json::object(), 5), base::Error);
  EXPECT_THROW(ledger.mark_finished("a", "exploded", json::object(), 5), base::Error);
  ledger.mark_running("a", 2);
  try {
    ledger.mark_running("a", 3);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("run a is running, not queued"), std::string::npos) << e.what();
  }
  ledger.mark_finished("a", "failed", json{{"status", "failed"}}, 4);
  EXPECT_THROW(ledger.mark_finished("a", "succeeded", json::object(), 5), base::Error);
  EXPECT_EQ(ledger.get("a")->state, "failed");

  // Cancelled while still queued: finished without ever running.
  ledger.insert_queued("b", json::object(), json::object(), {}, 0, 0, 6);
  ledger.mark_finished("b", "cancelled", json{{"status", "cancelled"}}, 7);
  EXPECT_FALSE(ledger.get("b")->started_ms);
  EXPECT_EQ(ledger.get("b")->finished_ms, 7);
}

TEST_F(LedgerTest, ToJsonHasTheApiShape) {
  Ledger ledger(db_);
  ledger.insert_queued("a", json{{"argv", {"ls"}}}, json{{"policy_sha256", "x"}}, {{"k", "v"}}, 7, 8, 100);
  const json queued = ledger.get("a")->to_json();
  EXPECT_EQ(queued, json({{"id", "a"},
                          {"state", "queued"},
                          {"labels", {{"k", "v"}}},
                          {"peer", {{"uid", 7}, {"pid", 8}}},
                          {"times", {{"created", 100}, {"started", nullptr}, {"finished", nullptr}}},
                          {"spec", {{"argv", {"ls"}}}},
                          {"pinned", {{"policy_sha256", "x"}}},
                          {"result", nullptr},
                          {"tests", nullptr},
                          {"diff", nullptr},
                          {"proxy", nullptr},
                          {"classfiles", nullptr},
                          {"coverage", nullptr},
                          {"replay_of", nullptr},
                          {"replay_vary", nullptr},
                          {"outputs", nullptr}}));
  ledger.mark_running("a", 101);
  ledger.mark_finished("a", "timed_out", json{{"result", {{"exit_code", -1}}}, {"tests", {{"total", 3}}}}, 102);
  const json done = ledger.get("a")->to_json();
  EXPECT_EQ(done["times"]["started"], 101);
  EXPECT_EQ(done["times"]["finished"], 102);
  EXPECT_EQ(done["state"], "timed_out");
  EXPECT_EQ(done["result"]["exit_code"], -1);
  EXPECT_EQ(done["tests"]["total"], 3) << "the outcome's sections are at the top, once";
  EXPECT_FALSE(done.contains("record"));
}

TEST_F(LedgerTest, KeysetPaginationOver120Rows) {
  Ledger ledger(db_);
  // Pairs of runs share a created_ms, so the id breaks ties.
  for (int i = 0; i < 120; ++i) ledger.insert_queued(run_id(i), json::object(), json::object(), {}, 0, 0, 1000 + i / 2);

  std::vector<std::string> seen;
  RunFilter filter;
  filter.limit = 25;
  int pages = 0;
  for (;;) {
    RunPage page = ledger.list(filter);
    ++pages;
    for (const auto& run : page.runs) seen.push_back(run.id);
    if (!page.next) break;
    EXPECT_EQ(page.runs.size(), 25u);
    EXPECT_EQ(*page.next, page.runs.back().id);
    filter.after = page.next;
    // A run inserted while paging (newer than everything) must not shift later pages.
    if (pages == 1) ledger.insert_queued("late", json::object(), json::object(), {}, 0, 0, 999999);
  }
  EXPECT_EQ(pages, 5);
  ASSERT_EQ(seen.size(), 120u);
  for (int i = 0; i < 120; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], run_id(119 - i));

  // Exactly one full page: no next cursor.
  RunFilter exact;
  exact.limit = 121;
  RunPage all = ledger.list(exact);
  EXPECT_EQ(all.runs.size(), 121u);
  EXPECT_EQ(all.runs.front().id, "late");
  EXPECT_FALSE(all.next);

  RunFilter bad;
  bad.after = "no-such-run";
  EXPECT_THROW(ledger.list(bad), LedgerCursorError);

  RunFilter zero;
  zero.limit = 0;  // clamped to 1
  EXPECT_EQ(ledger.list(zero).runs.size(), 1u);
}

TEST_F(LedgerTest, FiltersByStateAndLabels) {
  Ledger ledger(db_);
  ledger.insert_queued("j17-a", json::object(), json::object(), {{"bench", "java"}, {"jdk", "17"}}, 0, 0, 1);
  ledger.insert_queued("j21-a", json::object(), json::object(), {{"bench", "java"}, {"jdk", "21"}}, 0, 0, 2);
  ledger.insert_queued("py-a", json::object(), json::object(), {{"bench", "python"}}, 0, 0, 3);
  ledger.insert_queued("j17-b", json::object(), json::object(), {{"bench", "java"}, {"jdk", "17"}, {"a.b/c-d_e", "x"}}, 0, 0, 4);
  ledger.mark_running("j17-a", 5);
  ledger.mark_finished("j17-a", "succeeded", json::object(), 6);

  auto ids = [&](RunFilter filter) {
    std::vector<std::string> out;
    for (const auto& run : ledger.list(filter).runs) out.push_back(run.id);
    return out;
  };
  RunFilter java;
  java.labels = {{"bench", "java"}};
  EXPECT_EQ(ids(java), (std::vector<std::string>{"j17-b", "j21-a", "j17-a"}));

  RunFilter java17 = java;
  java17.labels["jdk"] = "17";
  EXPECT_EQ(ids(java17), (std::vector<std::string>{"j17-b", "j17-a"}));

  RunFilter java17_done = java17;
  java17_done.state = "succeeded";
  EXPECT_EQ(ids(java17_done), (std::vector<std::string>{"j17-a"}));

  RunFilter queued;
  queued.state = "queued";
  EXPECT_EQ(ids(queued), (std::vector<std::string>{"j17-b", "py-a", "j21-a"}));

  RunFilter dotted;
  dotted.labels = {{"a.b/c-d_e", "x"}};  // a key that would need quoting in a JSON path
  EXPECT_EQ(ids(dotted), (std::vector<std::string>{"j17-b"}));

  RunFilter absent;
  absent.labels = {{"jdk", "8"}};
  EXPECT_TRUE(ids(absent).empty());

  RunFilter paged = java;
  paged.limit = 2;
  RunPage first = ledger.list(paged);
  ASSERT_TRUE(first.next);
  paged.after = first.next;
  EXPECT_EQ(ids(paged), (std::vector<std::string>{"j17-a"}));
}

TEST_F(LedgerTest, InjectionLookingLabelsAreJustData) {
  Ledger ledger(db_);
  const std::string evil_value = "x' OR '1'='1";
  const std::string evil_key = "k\"); DROP TABLE runs; --";
  const std::string dollar_key = "$.bench";
  ledger.insert_queued("evil", json::object(), json::object(), {{evil_key, evil_value}, {dollar_key, "\"quoted\""}}, 0, 0, 1);
  ledger.insert_queued("plain", json::object(), json::object(), {{"bench", "java"}}, 0, 0, 2);

  RunFilter by_value;
  by_value.labels = {{evil_key, evil_value}};
  RunPage page = ledger.list(by_value);
  ASSERT_EQ(page.runs.size(), 1u);
  EXPECT_EQ(page.runs[0].id, "evil");
  EXPECT_EQ(page.runs[0].labels[evil_key], evil_value);

  RunFilter tautology;
  tautology.labels = {{"bench", "' OR 1=1 --"}};
  EXPECT_TRUE(ledger.list(tautology).runs.empty());

  RunFilter dollar;
  dollar.labels = {{dollar_key, "\"quoted\""}};
  EXPECT_EQ(ledger.list(dollar).runs.size(), 1u);

  RunFilter state;
  state.state = "queued' OR '1'='1";
  EXPECT_TRUE(ledger.list(state).runs.empty());
  EXPECT_EQ(ledger.list(RunFilter{}).runs.size(), 2u);  // the table survived
  EXPECT_TRUE(ledger.get("x' OR '1'='1") == std::nullopt);
}

TEST_F(LedgerTest, MarksUnfinishedRunsInterrupted) {
  {
    Ledger ledger(db_);
    ledger.insert_queued("q", json::object(), json::object(), {}, 0, 0, 1);
    ledger.insert_queued("r", json::object(), json::object(), {}, 0, 0, 2);
    ledger.insert_queued("done", json::object(), json::object(), {}, 0, 0, 3);
    ledger.mark_running("r", 4);
    ledger.mark_running("done", 5);
    ledger.mark_finished("done", "succeeded", json{{"result", json::object()}}, 6);
  }
  Ledger ledger(db_);  // the daemon restarted
  EXPECT_EQ(ledger.mark_unfinished_interrupted(100), (std::vector<std::string>{"q", "r"}));
  auto q = ledger.get("q");
  EXPECT_EQ(q->state, "interrupted");
  EXPECT_EQ(q->finished_ms, 100);
  EXPECT_EQ(*q->outcome, json({{"result", {{"reason", "daemon restarted while the run was queued"}}}}));
  EXPECT_EQ((*ledger.get("r")->outcome)["result"]["reason"], "daemon restarted while the run was running");
  EXPECT_EQ(ledger.get("done")->state, "succeeded");
  EXPECT_TRUE(ledger.mark_unfinished_interrupted(200).empty());
}

TEST_F(LedgerTest, CountsByState) {
  Ledger ledger(db_);
  ledger.insert_queued("a", json::object(), json::object(), {}, 0, 0, 1);
  ledger.insert_queued("b", json::object(), json::object(), {}, 0, 0, 2);
  ledger.insert_queued("c", json::object(), json::object(), {}, 0, 0, 3);
  ledger.mark_running("b", 4);
  ledger.mark_running("c", 4);
  ledger.mark_finished("c", "oom_killed", json::object(), 5);
  auto counts = ledger.count_by_state();
  EXPECT_EQ(counts.size(), run_states().size());
  EXPECT_EQ(counts["queued"], 1u);
  EXPECT_EQ(counts["running"], 1u);
  EXPECT_EQ(counts["oom_killed"], 1u);
  EXPECT_EQ(counts["succeeded"], 0u);
}

TEST_F(LedgerTest, ConcurrentInsertsFromEightThreads) {
  Ledger ledger(db_);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ledger, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = "t" + std::to_string(t) + "-" + std::to_string(i);
        ledger.insert_queued(id, json{{"i", i}}, json::object(), {{"thread", std::to_string(t)}}, 0, t, t * 1000 + i);
        ledger.mark_running(id, t * 1000 + i + 1);
        if (i % 2 == 0) ledger.mark_finished(id, "succeeded", json::object(), t * 1000 + i + 2);
        (void)ledger.list(RunFilter{});
      }
    });
  }
  for (auto& thread : threads) thread.join();

  auto counts = ledger.count_by_state();
  EXPECT_EQ(counts["succeeded"], kThreads * kPerThread / 2u);
  EXPECT_EQ(counts["running"], kThreads * kPerThread / 2u);
  RunFilter thread3;
  thread3.labels = {{"thread", "3"}};
  thread3.limit = 1000;
  EXPECT_EQ(ledger.list(thread3).runs.size(), static_cast<std::size_t>(kPerThread));

  // A second connection (another Ledger on the same file) sees every row.
  Ledger reader(db_);
  RunFilter all;
  all.limit = 1000;
  std::set<std::string> ids;
  for (const auto& run : reader.list(all).runs) ids.insert(run.id);
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kThreads * kPerThread));
}

// A ledger written by the v1 schema (pins and *_ms limits inside the spec, status and manifest in the record)
// is upgraded in place: its runs read as run objects and their specs are valid requests again.
TEST_F(LedgerTest, V1RowsAreUpgradedToTheRunObject) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    const std::string v1_spec = json{{"image", "jdk:17"}, {"argv", {"mvn", "verify"}}, {"env", json::object()},
                                     {"cwd", nullptr}, {"network", "none"}, {"policy", "default"},
                                     {"labels", json::object()}, {"collect", {{"junit", json::array()}}},
                                     {"limits", {{"wall_time_ms", 60000}, {"memory_bytes", 1073741824}, {"pids", 100}}},
                                     {"workspace", {{"path", "/srv/p"}, {"mode", "cow"}}}, {"stdin_bytes", 0},
                                     {"layers", json::array()}, {"image_digest", "sha256:" + std::string(64, 'a')},
                                     {"image_digests", {"sha256:" + std::string(64, 'a')}}}.dump();
    const std::string v1_record = json{{"status", "failed"}, {"exit_code", 1}, {"wall_ms", 12.5},
                                       {"stdout", {{"head", "x"}}}, {"tests", {{"total", 2}}},
                                       {"manifest", {{"image", "jdk:17"}}}}.dump();
    const std::string sql =
        "CREATE TABLE runs (id TEXT PRIMARY KEY NOT NULL, state TEXT NOT NULL, created_ms INTEGER NOT NULL,"
        " started_ms INTEGER, finished_ms INTEGER, labels TEXT NOT NULL DEFAULT '{}', spec TEXT NOT NULL,"
        " record TEXT, peer_uid INTEGER NOT NULL, peer_pid INTEGER NOT NULL);"
        "INSERT INTO runs VALUES ('old', 'failed', 1, 2, 3, '{}', '" + v1_spec + "', '" + v1_record + "', 0, 9);"
        "INSERT INTO runs VALUES ('live', 'queued', 4, NULL, NULL, '{}', '" + v1_spec + "', NULL, 0, 9);"
        "PRAGMA user_version = 1;";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  Ledger ledger(db_);
  const json old = ledger.get("old")->to_json();
  EXPECT_EQ(old["state"], "failed");
  EXPECT_EQ(old["result"]["exit_code"], 1);
  EXPECT_EQ(old["result"]["stdout"]["head"], "x");
  EXPECT_FALSE(old["result"].contains("status")) << "the state says it once";
  EXPECT_EQ(old["tests"]["total"], 2);
  EXPECT_EQ(old["pinned"]["image_digests"], json::array({"sha256:" + std::string(64, 'a')}));
  EXPECT_EQ(old["spec"]["limits"]["wall_time"], 60000);
  EXPECT_EQ(old["spec"]["limits"]["memory"], 1073741824);
  EXPECT_FALSE(old["spec"].contains("image_digests"));
  const spec::RunSpec again = spec::parse_run_spec(old["spec"], spec::default_limit_policy());
  EXPECT_EQ(again.limits.wall_time, std::chrono::minutes(1));
  EXPECT_EQ(again.workspace->path, "/srv/p");
  EXPECT_TRUE(ledger.get("live")->to_json()["result"].is_null());
}

}  // namespace
}  // namespace capsule::daemon

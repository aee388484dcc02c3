// Ledger schema v3: a v2 database upgrades in place (rows, indexes, the new state idle_timed_out, the session
// column), and session rows persist, list and become lost at restart.
#include "daemon/ledger.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>

namespace capsule::daemon {
namespace {

using nlohmann::json;

class LedgerSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-ledger-v3-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    db_ = dir_ + "/ledger.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string sql_value(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    std::string out;
    sqlite3_exec(
        db, sql.c_str(),
        [](void* into, int, char** values, char**) {
          *static_cast<std::string*>(into) += values[0] != nullptr ? values[0] : "NULL";
          *static_cast<std::string*>(into) += ";";
          return 0;
        },
        &out, nullptr);
    sqlite3_close(db);
    return out;
  }

  std::string dir_;
  std::string db_;
};

TEST_F(LedgerSessionsTest, V2DatabaseUpgradesKeepingRowsAndAcceptsIdleTimedOut) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    const std::string sql =
        "CREATE TABLE runs (id TEXT PRIMARY KEY NOT NULL, state TEXT NOT NULL CHECK (state IN ('queued', 'running',"
        " 'succeeded', 'failed', 'timed_out', 'oom_killed', 'signaled', 'cancelled', 'setup_failed',"
        " 'internal_error', 'interrupted')), created_ms INTEGER NOT NULL, started_ms INTEGER, finished_ms INTEGER,"
        " labels TEXT NOT NULL DEFAULT '{}', spec TEXT NOT NULL, record TEXT, peer_uid INTEGER NOT NULL,"
        " peer_pid INTEGER NOT NULL, pinned TEXT NOT NULL DEFAULT '{}');"
        "CREATE INDEX runs_newest ON runs (created_ms DESC, id DESC);"
        "CREATE INDEX runs_by_state ON runs (state, created_ms DESC, id DESC);"
        "INSERT INTO runs VALUES ('old', 'failed', 1, 2, 3, '{\"k\":\"v\"}', '{\"argv\":[\"x\"]}',"
        " '{\"result\":{\"exit_code\":1}}', 7, 9, '{\"image_digests\":[]}');"
        "INSERT INTO runs VALUES ('live', 'running', 4, 5, NULL, '{}', '{\"argv\":[\"y\"]}', NULL, 0, 9, '{}');"
        "PRAGMA user_version = 2;";
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  {
    Ledger ledger(db_);
    const json old = ledger.get("old")->to_json();
    EXPECT_EQ(old["state"], "failed");
    EXPECT_EQ(old["labels"], json({{"k", "v"}}));
    EXPECT_EQ(old["result"]["exit_code"], 1);
    EXPECT_EQ(old["peer"]["uid"], 7);
    EXPECT_EQ(old["times"]["finished"], 3);
    EXPECT_EQ(old["spec"]["argv"], json({"x"}));
    ledger.mark_finished("live", "idle_timed_out", {{"result", {{"reason", "no output"}}}}, 10);
    EXPECT_EQ(ledger.get("live")->state, "idle_timed_out");
    EXPECT_EQ(ledger.count_by_state()["idle_timed_out"], 1u);
    ledger.insert_queued("exec-1", {{"session", "s1"}}, json::object(), {}, 0, 1, 20, "s1");
    RunFilter filter;
    filter.session = "s1";
    const RunPage page = ledger.list(filter);
    ASSERT_EQ(page.runs.size(), 1u);
    EXPECT_EQ(page.runs[0].id, "exec-1");
  }
  EXPECT_EQ(sql_value("PRAGMA user_version"), std::to_string(Ledger::kSchemaVersion) + ";");
  EXPECT_EQ(sql_value("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs' AND sql IS NOT NULL ORDER BY name"),
            "runs_by_session;runs_by_state;runs_newest;");
  EXPECT_EQ(sql_value("SELECT COUNT(*) FROM runs"), "3;");
  Ledger reopened(db_);  // a v3 database opens again without migrating twice
  EXPECT_EQ(reopened.get("old")->state, "failed");
}

TEST_F(LedgerSessionsTest, SessionRowsPersistAndLiveOnesBecomeLost) {
  {
    Ledger ledger(db_);
    for (const char* id : {"s-a", "s-b", "s-c"}) {
      SessionRow row;
      row.id = id;
      row.state = "ready";
      row.created_ms = id[2] == 'a' ? 1 : id[2] == 'b' ? 2 : 3;
      row.last_used_ms = row.created_ms;
      row.labels = {{"task", id}};
      row.spec = {{"image", "host"}};
      row.peer_uid = 1000;
      ledger.insert_session(row);
    }
    SessionRow b = *ledger.get_session("s-b");
    b.state = "deleted";
    b.ended_ms = 50;
    b.ended_reason = "deleted by uid 1000";
    ledger.update_session(b);
    SessionRow c = *ledger.get_session("s-c");
    c.state = "frozen";
    ledger.update_session(c);
    SessionRow unknown;
    unknown.id = "nope";
    unknown.state = "ready";
    EXPECT_THROW(ledger.update_session(unknown), base::Error);
  }
  Ledger ledger(db_);
  EXPECT_EQ(ledger.mark_live_sessions_lost(99), (std::vector<std::string>{"s-a", "s-c"}));
  const SessionRow a = *ledger.get_session("s-a");
  EXPECT_EQ(a.state, "lost");
  EXPECT_EQ(a.ended_ms, 99);
  EXPECT_NE(a.ended_reason.find("restarted"), std::string::npos) << a.ended_reason;
  EXPECT_EQ(a.labels, json({{"task", "s-a"}}));
  EXPECT_EQ(a.peer_uid, 1000u);
  EXPECT_EQ(ledger.get_session("s-b")->state, "deleted") << "an ended session stays as it ended";
  EXPECT_EQ(ledger.get_session("s-b")->ended_reason, "deleted by uid 1000");
  const auto all = ledger.list_sessions(SessionFilter{}).sessions;
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, "s-c") << "newest first";
  SessionFilter deleted;
  deleted.state = "deleted";
  EXPECT_EQ(ledger.list_sessions(deleted).sessions.size(), 1u);
  EXPECT_FALSE(ledger.get_session("nope"));
}

TEST_F(LedgerSessionsTest, SessionsListInPagesWithStateAndLabelFilters) {
  Ledger ledger(db_);
  for (int i = 1; i <= 5; ++i) {
    SessionRow row;
    row.id = "s-" + std::to_string(i);
    row.state = i == 3 ? "deleted" : "ready";
    row.created_ms = i;
    row.labels = {{"odd", i % 2 == 1 ? "yes" : "no"}};
    row.spec = json::object();
    ledger.insert_session(row);
  }
  SessionFilter filter;
  filter.limit = 2;
  std::vector<std::string> seen;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 5);
    const SessionPage page = ledger.list_sessions(filter);
    for (const auto& row : page.sessions) seen.push_back(row.id);
    if (!page.next) break;
    EXPECT_EQ(*page.next, page.sessions.back().id);
    filter.after = page.next;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"s-5", "s-4", "s-3", "s-2", "s-1"}));

  SessionFilter ready;
  ready.state = "ready";
  ready.labels["odd"] = "yes";
  const SessionPage odd_ready = ledger.list_sessions(ready);
  ASSERT_EQ(odd_ready.sessions.size(), 2u);
  EXPECT_EQ(odd_ready.sessions[0].id, "s-5");
  EXPECT_EQ(odd_ready.sessions[1].id, "s-1");
  EXPECT_FALSE(odd_ready.next);

  SessionFilter unknown;
  unknown.after = "no-such-session";
  EXPECT_THROW(ledger.list_sessions(unknown), LedgerCursorError);
}

// What snapshot GC keeps: every workspace_digest pinned by a run or a session row, once.
TEST_F(LedgerSessionsTest, PinnedWorkspaceDigestsOfRunsAndSessions) {
  Ledger ledger(db_);
  const std::string a = "sha256:" + std::string(64, 'a'), b = "sha256:" + std::string(64, 'b');
  EXPECT_TRUE(ledger.pinned_workspace_digests().empty());
  ledger.insert_queued("r1", {{"argv", {"true"}}}, {{"workspace_digest", a}}, {}, 0, 1, 1);
  ledger.insert_queued("r2", {{"argv", {"true"}}}, {{"workspace_digest", a}}, {}, 0, 1, 2);
  ledger.insert_queued("r3", {{"argv", {"true"}}}, {{"workspace_digest", nullptr}}, {}, 0, 1, 3);
  ledger.insert_queued("r4", {{"argv", {"true"}}}, json::object(), {}, 0, 1, 4);
  SessionRow row;
  row.id = "s1";
  row.state = "ready";
  row.spec = {{"image", "host"}};
  row.pinned = {{"workspace_digest", b}};
  ledger.insert_session(row);
  EXPECT_EQ(ledger.pinned_workspace_digests(), std::set<std::string>({a, b}));
}

}  // namespace
}  // namespace capsule::daemon

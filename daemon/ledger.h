// Ledger: the durable record of every run (queued -> running -> finished) in one SQLite database,
// with the queries the API needs: get by id, newest-first listing with filters and keyset pagination.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "spec/run_object.h"

struct sqlite3;
struct sqlite3_stmt;

namespace capsule::daemon {

// Every failure here is a base::Error with step "ledger": a SQLite failure (naming the database file, the
// statement's purpose and SQLite's message) or a broken invariant (unknown run, run already finished, unknown state).

// RunFilter::after names no run: the client sent a cursor that this ledger never handed out ("invalid_query").
// SessionFilter::after names no session, likewise.
class LedgerCursorError : public base::Error {
 public:
  explicit LedgerCursorError(const std::string& cursor, const std::string& kind = "run")
      : base::Error(base::Cause{"ledger", "", 0, "cursor '" + cursor + "' names no " + kind}, "invalid_query") {}
};

// A ledger row is the run object (spec/run_object.h): the outcome column holds what finishing recorded.
using RunRow = spec::RunObject;

struct RunFilter {
  std::optional<std::string> state;
  std::optional<std::string> session;         // only the execs of this session
  std::map<std::string, std::string> labels;  // every pair must match
  std::size_t limit = 50;                     // clamped to [1, Ledger::kMaxListLimit]
  std::optional<std::string> after;           // cursor: id of the last row of the previous page
};

struct RunPage {
  std::vector<RunRow> runs;          // newest first: created_ms DESC, id DESC
  std::optional<std::string> next;   // pass as RunFilter::after for the next page; empty on the last page
};

// A finished run as retention sees it: when it finished and what its row takes in the database.
struct FinishedRunSize {
  std::string id;
  std::int64_t finished_ms = 0;
  std::uint64_t record_bytes = 0;  // spec + pinned + outcome + labels, as stored
};

// Every state a run can be in; the schema rejects anything else.
const std::vector<std::string>& run_states();

// A session's durable record (daemon/sessions/): what it was made from and how it ended.
struct SessionRow {
  std::string id;
  std::string state;  // ready, frozen, deleted, expired, lost, failed
  std::int64_t created_ms = 0;
  std::optional<std::int64_t> ended_ms;
  std::int64_t last_used_ms = 0;
  nlohmann::json labels = nlohmann::json::object();
  nlohmann::json spec;    // to_json(SessionSpec)
  nlohmann::json pinned;  // to_json(Pinned)
  uid_t peer_uid = 0;
  pid_t peer_pid = 0;
  std::string ended_reason;
};

// Every state a session can be in; ready and frozen are live.
const std::vector<std::string>& session_states();

struct SessionFilter {
  std::optional<std::string> state;
  std::optional<uid_t> peer_uid;              // only this caller's
  std::map<std::string, std::string> labels;  // every pair must match
  std::size_t limit = 50;                     // clamped to [1, Ledger::kMaxListLimit]
  std::optional<std::string> after;           // cursor: id of the last row of the previous page
};

struct SessionPage {
  std::vector<SessionRow> sessions;  // newest first: created_ms DESC, id DESC
  std::optional<std::string> next;   // pass as SessionFilter::after for the next page; empty on the last page
};

// A queued run's row as the ledger stores it; a manager keeps it and updates it as the run moves on, so its
// answer needs no read-back.
RunRow queued_row(const std::string& id, const nlohmann::json& spec, const nlohmann::json& pinned,
                  const std::map<std::string, std::string>& labels, uid_t peer_uid, pid_t peer_pid,
                  std::int64_t created_ms);

class Ledger {
 public:
  static constexpr std::size_t kMaxListLimit = 1000;
  static constexpr int kSchemaVersion = 3;

  // Opens (creating it 0600 if needed) the database and brings its schema to kSchemaVersion.
  // Throws base::Error if the file cannot be opened or holds a newer schema than this build knows.
  explicit Ledger(const std::string& db_path);
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // `spec` and `pinned` as spec/ prints them.
  // `session`: the session an exec runs in ("" for a run).
  void insert_queued(const std::string& id, const nlohmann::json& spec, const nlohmann::json& pinned,
                     const std::map<std::string, std::string>& labels, uid_t peer_uid, pid_t peer_pid,
                     std::int64_t created_ms, const std::string& session = "");
  // The same from the row queued_row made: what get() will read back until the run moves on.
  void insert_queued(const RunRow& row, const std::string& session = "");
  // queued -> running. Throws base::Error if the run is unknown or not queued.
  void mark_running(const std::string& id, std::int64_t started_ms);
  // queued|running -> `state` (a terminal state). Throws base::Error if the run is unknown or finished.
  // `outcome`: {"result", "tests", "diff", "proxy", ...} (daemon/record/run_record.h).
  // Then calls the finished observer, if any, with the id.
  void mark_finished(const std::string& id, const std::string& state, const nlohmann::json& outcome,
                     std::int64_t finished_ms);
  // Hears of each run mark_finished recorded, on the caller's thread, once the row is final; must not throw
  // or block. Set it before other threads use the ledger.
  void set_finished_observer(std::function<void(const std::string& id)> observer) {
    finished_observer_ = std::move(observer);
  }
  // Restart recovery: every queued or running run becomes `interrupted`; returns their ids, oldest first.
  std::vector<std::string> mark_unfinished_interrupted(std::int64_t now_ms);

  std::optional<RunRow> get(const std::string& id) const;
  // Throws LedgerCursorError if filter.after names no run.
  RunPage list(const RunFilter& filter) const;
  // Number of runs in each state; every state of run_states() is present (0 when none).
  std::map<std::string, std::uint64_t> count_by_state() const;

  enum class Removal { kRemoved, kUnknown, kActive };
  // Deletes a finished run's row; a queued or running run is left alone (kActive).
  Removal remove_finished(const std::string& id);
  // Every finished run, oldest finished first (finished_ms, then id).
  std::vector<FinishedRunSize> finished_runs_oldest_first() const;
  // Bytes of spec + pinned + outcome + labels over all rows (finished or not).
  std::uint64_t record_bytes_total() const;
  // Every pinned.workspace_digest of a run or session row: the snapshots that kept records name (their GC keeps
  // them; a replay needs them).
  std::set<std::string> pinned_workspace_digests() const;

  // Sessions. insert_session stores a new row; update_session sets state, last_used, ended and ended_reason.
  void insert_session(const SessionRow& row);
  void update_session(const SessionRow& row);
  std::optional<SessionRow> get_session(const std::string& id) const;
  // One page, newest first. Throws LedgerCursorError if filter.after names no session.
  SessionPage list_sessions(const SessionFilter& filter) const;
  // Restart recovery: every ready or frozen session becomes `lost`; returns their ids.
  std::vector<std::string> mark_live_sessions_lost(std::int64_t now_ms);

  const std::string& path() const { return path_; }

 private:
  void migrate();

  std::string path_;
  sqlite3* db_ = nullptr;
  mutable std::mutex mutex_;  // guards db_ and prepared_: one connection, one statement at a time
  // The statements every run and exec uses, prepared once (preparing costs more than a one-row write), by SQL.
  mutable std::map<std::string, sqlite3_stmt*, std::less<>> prepared_;
  std::function<void(const std::string& id)> finished_observer_;
};

}  // namespace capsule::daemon

// Ledger on SQLite: WAL journal, synchronous=NORMAL, one connection behind a mutex, prepared statements
// with bound parameters only, schema versioned with PRAGMA user_version.
#include "daemon/ledger.h"

#include "daemon/ledger_upgrade.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <tuple>
#include <variant>

namespace capsule::daemon {
namespace {

using nlohmann::json;

constexpr int kBusyTimeoutMs = 5000;
constexpr const char* kColumns =
    "id, state, created_ms, started_ms, finished_ms, labels, spec, pinned, record, peer_uid, peer_pid";

std::string sqlite_message(sqlite3* db) {
  return std::string(sqlite3_errmsg(db)) + " (code " + std::to_string(sqlite3_extended_errcode(db)) + ")";
}

[[noreturn]] void fail(sqlite3* db, const std::string& purpose) {
  const char* file = sqlite3_db_filename(db, "main");
  base::throw_error("ledger", file != nullptr && *file != '\0' ? file : ":memory:", purpose + ": " + sqlite_message(db));
}

// One prepared statement; every failure names its purpose.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql, std::string purpose) : db_(db), purpose_(std::move(purpose)) {
    if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK) {
      fail(db_, purpose_ + " (prepare)");
    }
  }
  // Borrowed from `prepared` (prepared there on first use), reset for the next borrower when done. The caller
  // holds the lock that guards `prepared`.
  Statement(sqlite3* db, std::map<std::string, sqlite3_stmt*, std::less<>>& prepared, std::string_view sql,
            std::string purpose)
      : db_(db), purpose_(std::move(purpose)), borrowed_(true) {
    auto it = prepared.find(sql);
    if (it == prepared.end()) {
      if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt_,
                             nullptr) != SQLITE_OK) {
        fail(db_, purpose_ + " (prepare)");
      }
      it = prepared.emplace(std::string(sql), stmt_).first;
    }
    stmt_ = it->second;
  }
  ~Statement() {
    if (!borrowed_) {
      sqlite3_finalize(stmt_);
      return;
    }
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::string_view text) {
    check(sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind_null(int index) {
    check(sqlite3_bind_null(stmt_, index));
    return *this;
  }
  Statement& bind(int index, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
  }
  // True while there is a row to read; false when the statement is done.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, purpose_);
  }
  void run() {
    while (step()) {
    }
  }

  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::optional<std::int64_t> optional_integer(int col) const {
    if (is_null(col)) return std::nullopt;
    return integer(col);
  }
  std::string text(int col) const {
    const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return data == nullptr ? std::string() : std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(db_, purpose_ + " (bind)");
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string purpose_;
  bool borrowed_ = false;
};

void exec(sqlite3* db, const std::string& sql, const std::string& purpose) { Statement(db, sql, purpose).run(); }

// BEGIN IMMEDIATE ... COMMIT, rolled back if the scope is left early.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE", "begin a transaction"); }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    exec(db_, "COMMIT", "commit a transaction");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  bool committed_ = false;
};

std::string row_text(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_column(const std::string& text, const std::string& id, const char* column) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    base::throw_error("ledger", "", "run " + id + ": column " + column + " does not hold valid JSON: " + e.what());
  }
}

// Reads a row selected with kColumns.
RunRow read_row(const Statement& row) {
  RunRow run;
  run.id = row.text(0);
  run.state = row.text(1);
  run.created_ms = row.integer(2);
  run.started_ms = row.optional_integer(3);
  run.finished_ms = row.optional_integer(4);
  run.labels = parse_column(row.text(5), run.id, "labels");
  run.spec = parse_column(row.text(6), run.id, "spec");
  run.pinned = parse_column(row.text(7), run.id, "pinned");
  if (!row.is_null(8)) run.outcome = parse_column(row.text(8), run.id, "record");
  run.peer_uid = static_cast<uid_t>(row.integer(9));
  run.peer_pid = static_cast<pid_t>(row.integer(10));
  return run;
}

bool is_unfinished(const std::string& state) { return state == "queued" || state == "running"; }

// Explains why a guarded UPDATE changed nothing: the run is unknown, or in another state.
[[noreturn]] void throw_wrong_state(sqlite3* db, const std::string& id, const std::string& wanted) {
  Statement query(db, "SELECT state FROM runs WHERE id = ?", "look up the state of run " + id);
  query.bind(1, id);
  if (!query.step()) base::throw_error("ledger", "", "no run with id " + id);
  base::throw_error("ledger", "", "run " + id + " is " + query.text(0) + ", not " + wanted);
}


using Bound = std::variant<std::string, std::int64_t>;

// One page of `table` (runs or sessions), newest first (created_ms, id): the rows whose `equals` columns hold
// their values and whose labels hold every pair, after the row `after` (LedgerCursorError naming `kind` when
// there is none), at most `limit` (clamped to [1, Ledger::kMaxListLimit]); the second is the last row's id
// when more follow. Only fixed SQL fragments are concatenated; every value is bound. The caller holds the lock.
template <typename Row, typename Read>
std::pair<std::vector<Row>, std::optional<std::string>> keyset_page(
    sqlite3* db, const std::string& table, const char* columns, const std::vector<std::pair<const char*, Bound>>& equals,
    const std::map<std::string, std::string>& labels, std::size_t requested, const std::optional<std::string>& after,
    const std::string& kind, Read read) {
  const std::size_t limit = std::clamp<std::size_t>(requested, 1, Ledger::kMaxListLimit);
  std::optional<std::int64_t> cursor_created_ms;
  if (after) {
    Statement cursor(db, "SELECT created_ms FROM " + table + " WHERE id = ?", "look up cursor " + *after);
    cursor.bind(1, *after);
    if (!cursor.step()) throw LedgerCursorError(*after, kind);
    cursor_created_ms = cursor.integer(0);
  }
  std::string sql = std::string("SELECT ") + columns + " FROM " + table + " WHERE 1 = 1";
  for (const auto& [column, value] : equals) sql += std::string(" AND ") + column + " = ?";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    sql += " AND EXISTS (SELECT 1 FROM json_each(" + table + ".labels) AS l WHERE l.key = ? AND l.type = 'text' AND l.value = ?)";
  }
  if (cursor_created_ms) sql += " AND (created_ms, id) < (?, ?)";
  sql += " ORDER BY created_ms DESC, id DESC LIMIT ?";

  Statement query(db, sql, "list " + table);
  int index = 1;
  for (const auto& [column, value] : equals) {
    if (const auto* text = std::get_if<std::string>(&value)) query.bind(index++, *text);
    else query.bind(index++, std::get<std::int64_t>(value));
  }
  for (const auto& [key, value] : labels) {
    query.bind(index++, key);
    query.bind(index++, value);
  }
  if (cursor_created_ms) {
    query.bind(index++, *cursor_created_ms);
    query.bind(index++, *after);
  }
  query.bind(index, static_cast<std::int64_t>(limit + 1));  // one extra row tells whether a next page exists
  std::pair<std::vector<Row>, std::optional<std::string>> page;
  while (query.step()) {
    if (page.first.size() == limit) {
      page.second = page.first.back().id;
      break;
    }
    page.first.push_back(read(query));
  }
  return page;
}

}  // namespace

const std::vector<std::string>& run_states() {
  static const std::vector<std::string> states = {"queued",   "running",   "succeeded",    "failed",
                                                  "timed_out", "oom_killed", "signaled",   "cancelled",
                                                  "setup_failed", "internal_error", "interrupted", "idle_timed_out"};
  return states;
}

const std::vector<std::string>& session_states() {
  static const std::vector<std::string> states = {"ready", "frozen", "deleted", "expired", "lost", "failed"};
  return states;
}


Ledger::Ledger(const std::string& db_path) : path_(db_path) {
  const bool in_memory = db_path == ":memory:";
  if (!in_memory) {
    // SQLite creates its -wal and -shm files with the database's mode, so this keeps all three private.
    const int fd = ::open(db_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) base::throw_errno("ledger", db_path, "open");
    ::close(fd);
  }
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(db_path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string message = db_ != nullptr ? sqlite_message(db_) : "out of memory";
    sqlite3_close_v2(db_);
    base::throw_error("ledger", db_path, "open: " + message);
  }
  try {
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    std::string mode;
    {
      Statement journal(db_, "PRAGMA journal_mode = WAL", "switch to the WAL journal");
      if (journal.step()) mode = journal.text(0);
    }
    if (mode != "wal" && !in_memory) base::throw_error("ledger", db_path, "journal_mode is '" + mode + "', not wal");
    exec(db_, "PRAGMA synchronous = NORMAL", "set synchronous=NORMAL");
    migrate();
  } catch (...) {
    sqlite3_close_v2(db_);
    throw;
  }
}

Ledger::~Ledger() {
  for (const auto& [sql, statement] : prepared_) sqlite3_finalize(statement);
  sqlite3_close_v2(db_);
}

// 'queued', 'running', ...: the states as an SQL list for a CHECK.
static std::string quoted_states() {
  std::string states;
  for (const auto& state : run_states()) states += (states.empty() ? "'" : ", '") + state + "'";
  return states;
}

// Rewrites every v1 row into the v2 form (daemon/ledger_upgrade.h), inside migrate()'s transaction.
static void upgrade_v1_rows(sqlite3* db) {
  std::vector<std::tuple<std::string, std::string, std::optional<std::string>>> rows;
  {
    Statement query(db, "SELECT id, spec, record FROM runs", "read v1 rows");
    while (query.step()) {
      rows.emplace_back(query.text(0), query.text(1),
                        query.is_null(2) ? std::nullopt : std::optional<std::string>(query.text(2)));
    }
  }
  for (const auto& [id, spec, record] : rows) {
    const UpgradedRow upgraded = upgrade_v1_row(parse_column(spec, id, "spec"),
                                                record ? parse_column(*record, id, "record") : json());
    Statement update(db, "UPDATE runs SET spec = ?, pinned = ?, record = ? WHERE id = ?", "upgrade run " + id);
    update.bind(1, row_text(upgraded.spec)).bind(2, row_text(upgraded.pinned));
    if (upgraded.outcome.is_null()) update.bind_null(3);
    else update.bind(3, row_text(upgraded.outcome));
    update.bind(4, id).run();
  }
}

void Ledger::migrate() {
  Transaction transaction(db_);
  std::int64_t version = 0;
  {
    Statement version_query(db_, "PRAGMA user_version", "read the schema version");
    if (version_query.step()) version = version_query.integer(0);
  }
  if (version > kSchemaVersion) {
    base::throw_error("ledger", path_,
                      "schema version " + std::to_string(version) + " is newer than this capsuled understands (" +
                          std::to_string(kSchemaVersion) + ")");
  }
  if (version < 1) {
    const std::string states = quoted_states();
    exec(db_,
         "CREATE TABLE runs ("
         " id TEXT PRIMARY KEY NOT NULL,"
         " state TEXT NOT NULL CHECK (state IN (" + states + ")),"
         " created_ms INTEGER NOT NULL,"
         " started_ms INTEGER,"
         " finished_ms INTEGER,"
         " labels TEXT NOT NULL DEFAULT '{}',"
         " spec TEXT NOT NULL,"
         " record TEXT,"
         " peer_uid INTEGER NOT NULL,"
         " peer_pid INTEGER NOT NULL)",
         "create table runs");
    exec(db_, "CREATE INDEX runs_newest ON runs (created_ms DESC, id DESC)", "create index runs_newest");
    exec(db_, "CREATE INDEX runs_by_state ON runs (state, created_ms DESC, id DESC)", "create index runs_by_state");
  }
  if (version < 2) {
    // v2: the run object's form (spec/run_object.h): pins apart from the spec, the outcome without the state.
    exec(db_, "ALTER TABLE runs ADD COLUMN pinned TEXT NOT NULL DEFAULT '{}'", "add column pinned");
    if (version == 1) upgrade_v1_rows(db_);
  }
  if (version < 3) {
    // v3: the state "idle_timed_out" and the session an exec ran in. SQLite cannot change a CHECK, so the
    // table is made anew and its rows copied; and a table of sessions.
    const std::string states = quoted_states();
    exec(db_,
         "CREATE TABLE runs_v3 ("
         " id TEXT PRIMARY KEY NOT NULL,"
         " state TEXT NOT NULL CHECK (state IN (" + states + ")),"
         " created_ms INTEGER NOT NULL,"
         " started_ms INTEGER,"
         " finished_ms INTEGER,"
         " labels TEXT NOT NULL DEFAULT '{}',"
         " spec TEXT NOT NULL,"
         " record TEXT,"
         " peer_uid INTEGER NOT NULL,"
         " peer_pid INTEGER NOT NULL,"
         " pinned TEXT NOT NULL DEFAULT '{}',"
         " session TEXT)",
         "create table runs_v3");
    exec(db_,
         "INSERT INTO runs_v3 (id, state, created_ms, started_ms, finished_ms, labels, spec, record, peer_uid,"
         " peer_pid, pinned) SELECT id, state, created_ms, started_ms, finished_ms, labels, spec, record, peer_uid,"
         " peer_pid, pinned FROM runs",
         "copy runs into runs_v3");
    exec(db_, "DROP TABLE runs", "drop the v2 table runs");
    exec(db_, "ALTER TABLE runs_v3 RENAME TO runs", "rename runs_v3 to runs");
    exec(db_, "CREATE INDEX runs_newest ON runs (created_ms DESC, id DESC)", "create index runs_newest");
    exec(db_, "CREATE INDEX runs_by_state ON runs (state, created_ms DESC, id DESC)", "create index runs_by_state");
    exec(db_, "CREATE INDEX runs_by_session ON runs (session, created_ms DESC, id DESC)", "create index runs_by_session");
    std::string session_states_sql;
    for (const auto& state : session_states()) {
      session_states_sql += (session_states_sql.empty() ? "'" : ", '") + state + "'";
    }
    exec(db_,
         "CREATE TABLE sessions ("
         " id TEXT PRIMARY KEY NOT NULL,"
         " state TEXT NOT NULL CHECK (state IN (" + session_states_sql + ")),"
         " created_ms INTEGER NOT NULL,"
         " ended_ms INTEGER,"
         " last_used_ms INTEGER NOT NULL,"
         " labels TEXT NOT NULL DEFAULT '{}',"
         " spec TEXT NOT NULL,"
         " pinned TEXT NOT NULL DEFAULT '{}',"
         " peer_uid INTEGER NOT NULL,"
         " peer_pid INTEGER NOT NULL,"
         " ended_reason TEXT NOT NULL DEFAULT '')",
         "create table sessions");
  }
  exec(db_, "PRAGMA user_version = " + std::to_string(kSchemaVersion), "set the schema version");
  transaction.commit();
}

RunRow queued_row(const std::string& id, const json& spec, const json& pinned,
                  const std::map<std::string, std::string>& labels, uid_t peer_uid, pid_t peer_pid,
                  std::int64_t created_ms) {
  RunRow row;
  row.id = id;
  row.state = "queued";
  row.labels = labels;
  row.peer_uid = peer_uid;
  row.peer_pid = peer_pid;
  row.created_ms = created_ms;
  row.spec = spec;
  row.pinned = pinned;
  return row;
}

void Ledger::insert_queued(const std::string& id, const json& spec, const json& pinned,
                           const std::map<std::string, std::string>& labels, uid_t peer_uid, pid_t peer_pid,
                           std::int64_t created_ms, const std::string& session) {
  insert_queued(queued_row(id, spec, pinned, labels, peer_uid, peer_pid, created_ms), session);
}

void Ledger::insert_queued(const RunRow& row, const std::string& session) {
  std::lock_guard lock(mutex_);
  Statement insert(db_, prepared_,
                   "INSERT INTO runs (id, state, created_ms, labels, spec, pinned, peer_uid, peer_pid, session)"
                   " VALUES (?, 'queued', ?, ?, ?, ?, ?, ?, ?)",
                   "insert queued run " + row.id);
  insert.bind(1, row.id).bind(2, row.created_ms).bind(3, row_text(row.labels)).bind(4, row_text(row.spec));
  insert.bind(5, row_text(row.pinned));
  insert.bind(6, static_cast<std::int64_t>(row.peer_uid)).bind(7, static_cast<std::int64_t>(row.peer_pid));
  if (session.empty()) insert.bind_null(8);
  else insert.bind(8, session);
  insert.run();
}

void Ledger::mark_running(const std::string& id, std::int64_t started_ms) {
  std::lock_guard lock(mutex_);
  Statement update(db_, prepared_, "UPDATE runs SET state = 'running', started_ms = ? WHERE id = ? AND state = 'queued'",
                   "mark run " + id + " running");
  update.bind(1, started_ms).bind(2, id).run();
  if (sqlite3_changes(db_) == 0) throw_wrong_state(db_, id, "queued");
}

void Ledger::mark_finished(const std::string& id, const std::string& state, const json& outcome,
                           std::int64_t finished_ms) {
  const auto& states = run_states();
  if (is_unfinished(state) || std::find(states.begin(), states.end(), state) == states.end()) {
    base::throw_error("ledger", "", "run " + id + ": '" + state + "' is not a finished state");
  }
  {
    std::lock_guard lock(mutex_);
    Statement update(db_, prepared_,
                     "UPDATE runs SET state = ?, record = ?, finished_ms = ?"
                     " WHERE id = ? AND state IN ('queued', 'running')",
                     "mark run " + id + " " + state);
    update.bind(1, state).bind(2, row_text(outcome)).bind(3, finished_ms).bind(4, id).run();
    if (sqlite3_changes(db_) == 0) throw_wrong_state(db_, id, "queued or running");
  }
  if (finished_observer_) finished_observer_(id);
}

std::vector<std::string> Ledger::mark_unfinished_interrupted(std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_);
  std::vector<std::pair<std::string, std::string>> unfinished;  // id, state
  {
    Statement query(db_, "SELECT id, state FROM runs WHERE state IN ('queued', 'running') ORDER BY created_ms, id",
                    "find unfinished runs");
    while (query.step()) unfinished.emplace_back(query.text(0), query.text(1));
  }
  std::vector<std::string> ids;
  for (const auto& [id, state] : unfinished) {
    const json record = {{"result", {{"reason", "daemon restarted while the run was " + state}}}};
    Statement update(db_, "UPDATE runs SET state = 'interrupted', record = ?, finished_ms = ? WHERE id = ?",
                     "mark run " + id + " interrupted");
    update.bind(1, row_text(record)).bind(2, now_ms).bind(3, id).run();
    ids.push_back(id);
  }
  transaction.commit();
  return ids;
}

std::optional<RunRow> Ledger::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  Statement query(db_, prepared_, std::string("SELECT ") + kColumns + " FROM runs WHERE id = ?", "get run " + id);
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  return read_row(query);
}

RunPage Ledger::list(const RunFilter& filter) const {
  std::vector<std::pair<const char*, Bound>> equals;
  if (filter.state) equals.emplace_back("state", *filter.state);
  if (filter.session) equals.emplace_back("session", *filter.session);
  std::lock_guard lock(mutex_);
  RunPage page;
  std::tie(page.runs, page.next) = keyset_page<RunRow>(db_, "runs", kColumns, equals, filter.labels, filter.limit,
                                                       filter.after, "run", read_row);
  return page;
}

std::map<std::string, std::uint64_t> Ledger::count_by_state() const {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& state : run_states()) counts[state] = 0;
  std::lock_guard lock(mutex_);
  Statement query(db_, "SELECT state, COUNT(*) FROM runs GROUP BY state", "count runs by state");
  while (query.step()) counts[query.text(0)] = static_cast<std::uint64_t>(query.integer(1));
  return counts;
}

Ledger::Removal Ledger::remove_finished(const std::string& id) {
  std::lock_guard lock(mutex_);
  Statement remove(db_, "DELETE FROM runs WHERE id = ? AND state NOT IN ('queued', 'running')", "delete run " + id);
  remove.bind(1, id).run();
  if (sqlite3_changes(db_) > 0) return Removal::kRemoved;
  Statement query(db_, "SELECT 1 FROM runs WHERE id = ?", "look up run " + id);
  query.bind(1, id);
  return query.step() ? Removal::kActive : Removal::kUnknown;
}

std::vector<FinishedRunSize> Ledger::finished_runs_oldest_first() const {
  std::lock_guard lock(mutex_);
  Statement query(db_,
                  "SELECT id, COALESCE(finished_ms, created_ms),"
                  " LENGTH(CAST(spec AS BLOB)) + LENGTH(CAST(pinned AS BLOB)) + COALESCE(LENGTH(CAST(record AS BLOB)), 0)"
                  " + LENGTH(CAST(labels AS BLOB))"
                  " FROM runs WHERE state NOT IN ('queued', 'running') ORDER BY 2, id",
                  "list finished runs for retention");
  std::vector<FinishedRunSize> runs;
  while (query.step()) {
    runs.push_back({query.text(0), query.integer(1), static_cast<std::uint64_t>(query.integer(2))});
  }
  return runs;
}

std::uint64_t Ledger::record_bytes_total() const {
  std::lock_guard lock(mutex_);
  Statement query(db_,
                  "SELECT COALESCE(SUM(LENGTH(CAST(spec AS BLOB)) + LENGTH(CAST(pinned AS BLOB)) + COALESCE(LENGTH(CAST(record AS BLOB)), 0)"
                  " + LENGTH(CAST(labels AS BLOB))), 0) FROM runs",
                  "sum record sizes");
  return query.step() ? static_cast<std::uint64_t>(query.integer(0)) : 0;
}

std::set<std::string> Ledger::pinned_workspace_digests() const {
  std::lock_guard lock(mutex_);
  Statement query(db_,
                  "SELECT json_extract(pinned, '$.workspace_digest') AS d FROM runs WHERE json_valid(pinned) AND d IS NOT NULL"
                  " UNION SELECT json_extract(pinned, '$.workspace_digest') AS d FROM sessions"
                  " WHERE json_valid(pinned) AND d IS NOT NULL",
                  "pinned workspace digests");
  std::set<std::string> out;
  while (query.step()) out.insert(query.text(0));
  return out;
}

namespace {

constexpr const char* kSessionColumns =
    "id, state, created_ms, ended_ms, last_used_ms, labels, spec, pinned, peer_uid, peer_pid, ended_reason";

SessionRow read_session(const Statement& row) {
  SessionRow session;
  session.id = row.text(0);
  session.state = row.text(1);
  session.created_ms = row.integer(2);
  session.ended_ms = row.optional_integer(3);
  session.last_used_ms = row.integer(4);
  session.labels = parse_column(row.text(5), session.id, "labels");
  session.spec = parse_column(row.text(6), session.id, "spec");
  session.pinned = parse_column(row.text(7), session.id, "pinned");
  session.peer_uid = static_cast<uid_t>(row.integer(8));
  session.peer_pid = static_cast<pid_t>(row.integer(9));
  session.ended_reason = row.text(10);
  return session;
}

}  // namespace

void Ledger::insert_session(const SessionRow& row) {
  std::lock_guard lock(mutex_);
  Statement insert(db_,
                   std::string("INSERT INTO sessions (") + kSessionColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   "insert session " + row.id);
  insert.bind(1, row.id).bind(2, row.state).bind(3, row.created_ms);
  if (row.ended_ms) insert.bind(4, *row.ended_ms);
  else insert.bind_null(4);
  insert.bind(5, row.last_used_ms).bind(6, row_text(row.labels)).bind(7, row_text(row.spec)).bind(8, row_text(row.pinned));
  insert.bind(9, static_cast<std::int64_t>(row.peer_uid)).bind(10, static_cast<std::int64_t>(row.peer_pid));
  insert.bind(11, row.ended_reason).run();
}

void Ledger::update_session(const SessionRow& row) {
  std::lock_guard lock(mutex_);
  Statement update(db_,
                   "UPDATE sessions SET state = ?, last_used_ms = ?, ended_ms = ?, ended_reason = ? WHERE id = ?",
                   "update session " + row.id);
  update.bind(1, row.state).bind(2, row.last_used_ms);
  if (row.ended_ms) update.bind(3, *row.ended_ms);
  else update.bind_null(3);
  update.bind(4, row.ended_reason).bind(5, row.id).run();
  if (sqlite3_changes(db_) == 0) base::throw_error("ledger", "", "no session with id " + row.id);
}

std::optional<SessionRow> Ledger::get_session(const std::string& id) const {
  std::lock_guard lock(mutex_);
  Statement query(db_, std::string("SELECT ") + kSessionColumns + " FROM sessions WHERE id = ?", "get session " + id);
  query.bind(1, id);
  if (!query.step()) return std::nullopt;
  return read_session(query);
}

SessionPage Ledger::list_sessions(const SessionFilter& filter) const {
  std::vector<std::pair<const char*, Bound>> equals;
  if (filter.state) equals.emplace_back("state", *filter.state);
  if (filter.peer_uid) equals.emplace_back("peer_uid", static_cast<std::int64_t>(*filter.peer_uid));
  std::lock_guard lock(mutex_);
  SessionPage page;
  std::tie(page.sessions, page.next) = keyset_page<SessionRow>(db_, "sessions", kSessionColumns, equals, filter.labels,
                                                               filter.limit, filter.after, "session", read_session);
  return page;
}

std::vector<std::string> Ledger::mark_live_sessions_lost(std::int64_t now_ms) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_);
  std::vector<std::string> ids;
  {
    Statement query(db_, "SELECT id FROM sessions WHERE state IN ('ready', 'frozen') ORDER BY created_ms, id",
                    "find live sessions");
    while (query.step()) ids.push_back(query.text(0));
  }
  Statement update(db_,
                   "UPDATE sessions SET state = 'lost', ended_ms = ?, ended_reason = 'capsuled restarted: its"
                   " sandbox is gone' WHERE state IN ('ready', 'frozen')",
                   "mark live sessions lost");
  update.bind(1, now_ms).run();
  transaction.commit();
  return ids;
}

}  // namespace capsule::daemon

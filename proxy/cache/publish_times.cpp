// PublishTimes on SQLite: WAL journal, one connection behind a mutex, bound parameters only; immutability comes
// from INSERT OR IGNORE on the coordinate's primary key followed by reading back what is stored.
#include "proxy/cache/publish_times.h"

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "proxy/error.h"

namespace capsule::proxy {
namespace {

constexpr int kBusyTimeoutMs = 5000;

[[noreturn]] void fail(sqlite3* db, const std::string& path, const std::string& purpose) {
  throw ProxyError("cache_failure", "publish-times", path,
                   purpose + ": " + (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

class Statement {
 public:
  Statement(sqlite3* db, const std::string& path, std::string_view sql, std::string purpose)
      : db_(db), path_(path), purpose_(std::move(purpose)) {
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK) {
      fail(db_, path_, purpose_);
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::string_view text) {
    if (sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT) != SQLITE_OK)
      fail(db_, path_, purpose_);
    return *this;
  }
  Statement& bind(int index, std::int64_t value) {
    if (sqlite3_bind_int64(stmt_, index, value) != SQLITE_OK) fail(db_, path_, purpose_);
    return *this;
  }
  // True while there is a row to read.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, path_, purpose_);
  }
  std::int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string text(int column) const {
    const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
    if (data == nullptr) return {};
    return std::string(data, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
  }

 private:
  sqlite3* db_;
  const std::string& path_;
  std::string purpose_;
  sqlite3_stmt* stmt_ = nullptr;
};

std::int64_t now_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

PublishTimes::PublishTimes(const std::filesystem::path& path) : path_(path.string()) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close_v2(db_);
    throw ProxyError("cache_failure", "publish-times", path_, "open: " + message);
  }
  try {
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    std::string mode;
    {
      Statement journal(db_, path_, "PRAGMA journal_mode = WAL", "switch to the WAL journal");
      if (journal.step()) mode = journal.text(0);
    }
    if (mode != "wal") {
      throw ProxyError("cache_failure", "publish-times", path_, "journal_mode is '" + mode + "', not wal");
    }
    Statement(db_, path_, "PRAGMA synchronous = NORMAL", "set synchronous=NORMAL").step();
    Statement(db_, path_,
              "CREATE TABLE IF NOT EXISTS publish_times ("
              "coordinate TEXT PRIMARY KEY NOT NULL, published_us INTEGER NOT NULL, "
              "source TEXT NOT NULL, recorded_us INTEGER NOT NULL) WITHOUT ROWID",
              "create the publish_times table")
        .step();
  } catch (...) {
    sqlite3_close_v2(db_);
    throw;
  }
}

PublishTimes::~PublishTimes() { sqlite3_close_v2(db_); }

std::optional<Micros> PublishTimes::get(const std::string& coordinate) {
  std::lock_guard lock(mutex_);
  Statement query(db_, path_, "SELECT published_us FROM publish_times WHERE coordinate = ?",
                  "look up " + coordinate);
  query.bind(1, coordinate);
  if (!query.step()) return std::nullopt;
  return query.integer(0);
}

Micros PublishTimes::put_once(const std::string& coordinate, Micros at, const std::string& source) {
  std::lock_guard lock(mutex_);
  Statement insert(db_, path_,
                   "INSERT OR IGNORE INTO publish_times (coordinate, published_us, source, recorded_us) "
                   "VALUES (?, ?, ?, ?)",
                   "store " + coordinate);
  insert.bind(1, coordinate).bind(2, at).bind(3, source).bind(4, now_micros()).step();
  // Another process may have stored a different time first; what is stored is the answer.
  Statement query(db_, path_, "SELECT published_us FROM publish_times WHERE coordinate = ?",
                  "read back " + coordinate);
  query.bind(1, coordinate);
  if (!query.step()) {
    throw ProxyError("cache_failure", "publish-times", path_, coordinate + ": no row after INSERT OR IGNORE");
  }
  return query.integer(0);
}

}  // namespace capsule::proxy

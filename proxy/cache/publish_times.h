// PublishTimes: the proxy's record of when each Maven version (GAV) was published, in SQLite. A time is stored
// once and never changes, so a cutoff keeps answering the same way even if the upstream's dates move later.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "proxy/cutoff.h"

struct sqlite3;

namespace capsule::proxy {

// Thread-safe (one connection behind a mutex); several processes may share the file (WAL journal).
// Storage failures throw ProxyError 500 "cache_failure" naming the file and SQLite's message.
class PublishTimes {
 public:
  // Opens or creates the database at `path` (its directory must exist).
  explicit PublishTimes(const std::filesystem::path& path);
  ~PublishTimes();
  PublishTimes(const PublishTimes&) = delete;
  PublishTimes& operator=(const PublishTimes&) = delete;

  // `coordinate` is "groupId:artifactId:version".
  std::optional<Micros> get(const std::string& coordinate);
  // Stores `at` unless the coordinate already has a time; returns the stored time (the existing one wins).
  // `source` says where the time came from ("last-modified https://...", "publish-times file", ...).
  Micros put_once(const std::string& coordinate, Micros at, const std::string& source);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::mutex mutex_;
  sqlite3* db_ = nullptr;
};

}  // namespace capsule::proxy

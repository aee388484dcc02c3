// Finding the snapshot of an unchanged directory instead of making it again: the tree's stat data read as the
// caller (tree_stat_key), and a bounded index, per caller and directory, of the stat data each snapshot was made from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "daemon/auth.h"
#include "daemon/snapshots/snapshot_limits.h"

namespace capsule::daemon {

// Whose directory, as the index keys it: "uid:gid:groups" (sorted supplementary groups, since other groups may read
// other files) and the directory's path as the caller named it.
struct ReuseKey {
  std::string caller;
  std::string dir;
  static ReuseKey of(const Caller& caller, const std::string& dir);
  auto operator<=>(const ReuseKey&) const = default;
};

// What GNU find, running as `caller` in `dir` (the directory opened as the caller), prints for every entry: type,
// mode, links, owner, size, mtime and ctime (nanoseconds), inode, device and path, as "sha256:<hex>"; nullopt when
// find failed (an unreadable directory: the snapshot itself then says why) or the tree is larger than `limits`.
struct TreeStat {
  std::string key;
  std::uint64_t entries = 0;
  std::int64_t newest = 0;   // the latest mtime or ctime of any entry, in whole seconds
  std::int64_t read_at = 0;  // when find started, in seconds of the wall clock
  // No entry changed in the kRacySeconds before the read: a second change within one clock tick of the first
  // would show the same times (git's "racily clean" entries), so a key read sooner vouches for nothing.
  bool settled() const;
};
inline constexpr std::int64_t kRacySeconds = 3;
std::optional<TreeStat> read_tree_stat(const Caller& caller, const OpenedHostPath& dir, const SnapshotLimits& limits);
// The key of a settled tree, else nullopt.
std::optional<std::string> tree_stat_key(const Caller& caller, const OpenedHostPath& dir, const SnapshotLimits& limits);

// <snapshots>/reuse.json: ReuseKey -> (tree stat key, digest) of the snapshot last made from that directory. At most
// kMaxEntries entries and kMaxBytes of JSON, the least recently used going first. Only a hint: a hit is used after
// the stat key is read again as the caller and the store still has the snapshot as this caller's
// (SnapshotStore::reclaim). An unreadable file is started afresh.
class SnapshotReuseIndex {
 public:
  static constexpr std::size_t kMaxEntries = 4096;
  static constexpr std::size_t kMaxBytes = 1 << 20;

  explicit SnapshotReuseIndex(std::filesystem::path file, std::size_t max_entries = kMaxEntries,
                              std::size_t max_bytes = kMaxBytes);

  // The digest remembered for `key` when it was made from a tree of stat key `tree`.
  std::optional<std::string> find(const ReuseKey& key, const std::string& tree);
  void remember(const ReuseKey& key, const std::string& tree, const std::string& digest);
  void forget(const ReuseKey& key);
  std::size_t size() const;

 private:
  struct Entry {
    std::string tree;
    std::string digest;
    std::uint64_t used = 0;  // a counter: larger is more recent
  };
  static nlohmann::json entry_json(const ReuseKey& key, const Entry& entry);
  static std::size_t bytes_of(const ReuseKey& key, const Entry& entry);
  void load();
  void save() const;  // under mutex_
  void evict();       // under mutex_

  std::filesystem::path file_;
  std::size_t max_entries_;
  std::size_t max_bytes_;
  mutable std::mutex mutex_;
  std::map<ReuseKey, Entry> entries_;
  std::size_t bytes_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace capsule::daemon

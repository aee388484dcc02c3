// SnapshotStore: <state>/snapshots/ holds each snapshot as its canonical tar (a blob, its sha256 the snapshot's
// digest), the same tree unpacked once (an overlay lower for workspaces) and a small JSON of metadata.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <condition_variable>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/dates.h"
#include "daemon/runs/disk_guard.h"
#include "daemon/snapshots/snapshot_limits.h"
#include "daemon/snapshots/snapshot_reuse.h"
#include "store/blob_store.h"

namespace capsule::daemon {

struct SnapshotInfo {
  std::string digest;         // "sha256:<hex>" of the canonical tar
  std::uint64_t size = 0;     // bytes of the canonical tar
  std::uint64_t files = 0;    // its entries: regular files, directories, symlinks (hard links included)
  std::string created;        // RFC 3339
  nlohmann::json source;      // {"dir": ...} | {"tar": ...} | {"git": ..., "rev": ..., "commit": ...}
  std::vector<uid_t> owners;  // who created it (each caller that created the same digest), first the first
  // The mtime (seconds since the epoch, > 0) of every entry of its tree: the commit's date for a git source, else
  // when the digest was first stored; kept by every later create of the digest. Not in the digest (the canonical
  // tar says 0): a tree of mtime 0 reads to Maven's resource copying as older than a missing file.
  std::int64_t mtime = 0;
  // The mtime its tree was unpacked with (0: before trees had one); lease() unpacks a tree that differs again.
  // Not in to_json.
  std::int64_t tree_mtime = 0;
  // The boot (/proc/sys/kernel/random/boot_id) its tree was unpacked in: the tree is written without syncing (the
  // blob is durable), so after a reboot a lease unpacks it again from the blob before using it. Not in to_json.
  std::string tree_boot;
  // RFC 3339 of its latest create (by any owner) or lease, kept to within an hour: how long it has gone unused,
  // for the GC. Metadata from before it was kept is dated when the store opens. Not in to_json.
  std::string last_used;

  // {digest, size, files, created, mtime, source, creator}: the API's snapshot object.
  nlohmann::json to_json() const;
};

// Held by a run or session using a snapshot as its workspace: while any lease is alive the snapshot cannot be
// removed (409 snapshot_in_use).
class SnapshotLease {
 public:
  ~SnapshotLease();
  SnapshotLease(const SnapshotLease&) = delete;
  SnapshotLease& operator=(const SnapshotLease&) = delete;
  const std::string& digest() const { return digest_; }
  const std::string& tree() const { return tree_; }  // the unpacked tree: root-owned, never written

 private:
  friend class SnapshotStore;
  SnapshotLease(class SnapshotStore* store, std::string digest, std::string tree)
      : store_(store), digest_(std::move(digest)), tree_(std::move(tree)) {}
  class SnapshotStore* store_;
  std::string digest_;
  std::string tree_;
};

// Unused snapshots' automatic collection, with the runs' retention: "snapshots_keep_days" (0: only a caller's
// `gc` or DELETE removes them) and "snapshots_max_total_bytes" (0: no cap).
struct SnapshotRetention {
  static constexpr std::uint64_t kMaxKeepDays = 36500;
  static constexpr base::Micros kGrace = 10 * 60 * base::kMicrosPerSecond;  // see SnapshotGc
  std::uint64_t keep_days = 30;
  std::uint64_t max_total_bytes = 0;
};

// What the garbage collection (SnapshotStore::collect_garbage) may remove. A candidate is a snapshot that no live
// run or session leases and no kept record pins; it goes when unused since before `unused_before_us`, or, oldest
// use first, while the store holds more than `max_total_bytes`; never when used at or after `kept_if_used_after_us`.
struct SnapshotGc {
  base::Micros unused_before_us = 0;  // 0: age alone removes nothing
  std::uint64_t max_total_bytes = 0;  // canonical tars' bytes; 0: no cap
  // The automatic sweep's grace (SnapshotRetention::kGrace): a snapshot just created for a run that has not leased
  // it yet, or one a bundle import is about to pin, is never taken by the age or the cap.
  base::Micros kept_if_used_after_us = std::numeric_limits<base::Micros>::max();
  std::optional<uid_t> owner;         // only this caller's claims; the snapshot goes with its last claim
  bool dry_run = false;               // say what would go, remove nothing
};

struct SnapshotGcReport {
  std::vector<SnapshotInfo> removed;   // gone from the store (or would be, in a dry run)
  std::vector<std::string> released;   // `owner`'s claim dropped; other owners keep the snapshot
  std::uint64_t bytes_freed = 0;
  std::size_t in_use = 0;              // candidates by age or size that a live run or session held
  nlohmann::json to_json() const;      // {removed: [snapshot], released: [digest], bytes_freed, in_use}
};

class SnapshotStore {
 public:
  // Creates the layout (0700) and removes what a create interrupted by a crash left: staging dirs, and trees or
  // blobs without metadata.
  SnapshotStore(std::filesystem::path root, SnapshotLimits limits = {}, StorageWatermark storage = {});
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;

  // A fresh private dir for one create's source files; removed by the caller (or at the next start).
  std::filesystem::path make_staging() const;

  // Canonicalises the tar at `source_tar` (checked with check_source_tar, unpacked with the images' safe
  // unpacker, packed again sorted with 0:0 owners, mtime 0 and no xattrs) and stores it, its tree's files dated
  // `mtime` (seconds; unset: now; clamped to [1 s, year 9999]). A digest already stored is returned as it is (its
  // first mtime kept), `owner` added to its owners. Atomic: on any error nothing new is left. Throws
  // http::ApiError (413 snapshot_too_large, 400 invalid_archive, 500).
  SnapshotInfo create(const std::filesystem::path& source_tar, const nlohmann::json& source, uid_t owner,
                      std::optional<std::int64_t> mtime = std::nullopt);

  // The stored snapshot `digest` as create() would return it for `owner` and `source`, and its use dated, when
  // `owner` already owns it; nullopt otherwise (gone, or not `owner`'s). For a tree found unchanged
  // (snapshot_reuse.h): nothing is read or written but the metadata.
  std::optional<SnapshotInfo> reclaim(const std::string& digest, const nlohmann::json& source, uid_t owner);

  std::optional<SnapshotInfo> find(const std::string& digest) const;  // nullopt for unknown or malformed digests
  std::vector<SnapshotInfo> list() const;                             // sorted by created time
  std::filesystem::path tar_path(const std::string& digest) const;    // the canonical tar of a stored snapshot

  // A lease on a stored snapshot; 404 snapshot_not_found otherwise.
  std::shared_ptr<const SnapshotLease> lease(const std::string& digest);

  // Removes `owner` from the snapshot's owners (every owner when `owner` is nullopt: root); the snapshot goes
  // when none is left. 409 snapshot_in_use while a run or session holds a lease, 404 snapshot_not_found.
  void remove(const std::string& digest, std::optional<uid_t> owner);

  // Removes unused snapshots by `gc` (see SnapshotGc). `pinned` gives the digests that kept records name as
  // pinned.workspace_digest (Ledger::pinned_workspace_digests), which are never removed; it is asked only when
  // there is a candidate. Each removal checks the snapshot's metadata again, so one created again or claimed by
  // another caller meanwhile stays.
  SnapshotGcReport collect_garbage(const std::function<std::set<std::string>()>& pinned, const SnapshotGc& gc);

  const SnapshotLimits& limits() const { return limits_; }
  // Which snapshot each caller's directory gave last (reuse.json): see directory_snapshot.h.
  SnapshotReuseIndex& reuse_index() { return reuse_; }
  // Before a source is read into staging: 507 insufficient_storage when the state filesystem is below its
  // watermark (a snapshot may take up to three times its size while it is made).
  void require_room() const { require_storage(root_.string(), storage_); }

 private:
  friend class SnapshotLease;
  void release(const std::string& digest);
  std::filesystem::path meta_path(const std::string& hex) const;
  std::filesystem::path tree_path(const std::string& hex) const;
  void write_meta(const SnapshotInfo& info) const;
  // trees/<hex> from the blob, replacing what is there, every entry dated `mtime`.
  void unpack_tree(const store::Digest& digest, std::int64_t mtime) const;
  void remove_leftovers();
  void date_undated_uses();
  enum class Removal { kKept, kClaimDropped, kRemoved };
  // remove() when `still` holds for the snapshot's current metadata (under the lock); kKept when it did not,
  // kClaimDropped when other owners keep the snapshot.
  Removal remove_if(const std::string& digest, std::optional<uid_t> owner,
                    const std::function<bool(const SnapshotInfo&)>& still);

  std::filesystem::path root_;
  SnapshotLimits limits_;
  StorageWatermark storage_;
  store::BlobStore blobs_;
  SnapshotReuseIndex reuse_;
  mutable std::mutex mutex_;            // metadata, trees and leases change together
  std::map<std::string, int> leases_;   // digest -> live leases
  std::set<std::string> busy_;          // digests whose blob and tree are being written or removed (outside mutex_)
  std::condition_variable busy_changed_;
};

// SnapshotInfo::mtime in JSON (metadata, the API, bundle.json): RFC 3339 in whole seconds, parsed back to seconds;
// nullopt for anything else or a time outside [1970-01-01T00:00:01Z, 9999-12-31T23:59:59Z].
nlohmann::json snapshot_mtime_json(std::int64_t seconds);
std::optional<std::int64_t> parse_snapshot_mtime(const nlohmann::json& value);

// "sha256:<hex>" -> 404 snapshot_not_found for anything else, naming `field`.
std::string checked_snapshot_digest(const std::string& text, const std::string& field);

}  // namespace capsule::daemon

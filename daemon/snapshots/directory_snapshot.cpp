// snapshot_directory: the stat key first (read before tar, so a change during the read shows as a new key next
// time), then a reuse when the index and the store agree, else tar, create and remember.
#include "daemon/snapshots/directory_snapshot.h"

#include "base/file_util.h"
#include "daemon/snapshots/snapshot_reuse.h"
#include "daemon/snapshots/snapshot_sources.h"

namespace capsule::daemon {
namespace fs = std::filesystem;

DirectorySnapshot snapshot_directory(SnapshotStore& store, const Caller& caller, const OpenedHostPath& dir,
                                     const nlohmann::json& description) {
  SnapshotReuseIndex& index = store.reuse_index();
  const ReuseKey key = ReuseKey::of(caller, dir.path);
  const std::optional<std::string> tree = tree_stat_key(caller, dir, store.limits());
  if (tree) {
    if (const std::optional<std::string> digest = index.find(key, *tree)) {
      if (std::optional<SnapshotInfo> info = store.reclaim(*digest, description, caller.uid)) return {*info, true};
    }
  }
  store.require_room();
  const base::ScopedDir scoped(store.make_staging());
  const fs::path& staging = scoped.path;
  const fs::path tar = tar_directory_as(caller, dir, staging, store.limits());
  DirectorySnapshot made{store.create(tar, description, caller.uid), false};
  if (tree) {
    index.remember(key, *tree, made.info.digest);
  } else {
    index.forget(key);
  }
  return made;
}

}  // namespace capsule::daemon

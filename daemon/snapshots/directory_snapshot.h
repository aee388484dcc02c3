// A snapshot of a host directory read as the caller: the one its unchanged tree gave before when the stat data
// say so (snapshot_reuse.h), else made now with tar; for POST /v1/snapshots {"dir"} and reproducible runs.
#pragma once

#include <nlohmann/json.hpp>

#include "daemon/auth.h"
#include "daemon/snapshots/snapshot_store.h"

namespace capsule::daemon {

struct DirectorySnapshot {
  SnapshotInfo info;    // as SnapshotStore::create returns it
  bool reused = false;  // found by the tree's stat data: nothing was read but the stat data
};

// The snapshot of `dir` (opened as `caller`; `dir.path` as the caller named it), described as `description`.
// Reused when this caller's last snapshot of that path was made from a tree whose stat key (read now, as the caller)
// is the same and the store still has it as the caller's; otherwise tar reads the tree as the caller and the result
// is remembered. Throws what tar_directory_as and SnapshotStore::create throw.
DirectorySnapshot snapshot_directory(SnapshotStore& store, const Caller& caller, const OpenedHostPath& dir,
                                     const nlohmann::json& description);

}  // namespace capsule::daemon

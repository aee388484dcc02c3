// attach_snapshot_workspace: which digest a workspace stands for (given, pinned, or made now from the directory
// as the caller) and the lease that keeps it while the run or session lives.
#include "daemon/snapshots/snapshot_workspace.h"

#include <algorithm>

#include "daemon/snapshots/directory_snapshot.h"
#include "http/response.h"

namespace capsule::daemon {

namespace {

// The directory snapshotted now (or found unchanged), read as the submission's caller (its opened directory when
// not root).
std::string snapshot_workspace_now(const Submission& run, SnapshotStore& store) {
  const std::string& path = run.spec.workspace->path;
  std::shared_ptr<const OpenedHostPath> dir = run.workspace_dir;
  if (!dir) {
    dir = std::make_shared<OpenedHostPath>(
        open_as_caller(run.caller, path, HostAccess::kReadDir, "workspace.path", "invalid_spec"));
  }
  return snapshot_directory(store, run.caller, *dir, {{"dir", path}, {"reproducible", true}}).info.digest;
}

}  // namespace

bool snapshots_at_submit(const Submission& run) {
  return run.spec.reproducible && run.spec.workspace && run.spec.workspace->snapshot.empty() &&
         !(run.pins_given && run.pinned.workspace_digest);
}

void attach_snapshot_workspace(Submission& run, SnapshotStore* store, const AccessPolicy& access) {
  run.workspace_snapshot.reset();
  const bool has_snapshot = run.spec.workspace && (!run.spec.workspace->snapshot.empty() || run.spec.reproducible);
  if (!has_snapshot) {
    // Only a snapshot names its bytes: a pin of a host directory or of no workspace would claim bytes never checked
    // (and a bundle would send that snapshot, maybe someone else's).
    if (run.pins_given && run.pinned.workspace_digest) {
      throw http::ApiError("pin_mismatch", "pinned.workspace_digest: only a {\"snapshot\"} or reproducible workspace "
                                           "has one; this run's workspace is " +
                                               std::string(run.spec.workspace ? "a host directory" : "none"));
    }
    return;
  }
  const spec::Workspace& workspace = *run.spec.workspace;
  const std::string field = workspace.snapshot.empty() ? "pinned.workspace_digest" : "workspace.snapshot";
  if (store == nullptr) throw http::ApiError("snapshot_not_found", field + ": this capsuled has no snapshot store");
  std::string digest;
  if (!workspace.snapshot.empty()) {
    digest = workspace.snapshot;
    if (run.pins_given && run.pinned.workspace_digest && *run.pinned.workspace_digest != digest) {
      throw http::ApiError("pin_mismatch", "pinned.workspace_digest: " + *run.pinned.workspace_digest +
                                               " is not the spec's workspace.snapshot " + digest);
    }
  } else if (run.pins_given && run.pinned.workspace_digest) {
    digest = checked_snapshot_digest(*run.pinned.workspace_digest, field);
  } else {
    digest = snapshot_workspace_now(run, *store);
  }
  const std::optional<SnapshotInfo> info = store->find(digest);
  const bool visible = info && (sees_all_runs(run.caller, access) ||
                                std::find(info->owners.begin(), info->owners.end(), run.caller.uid) != info->owners.end());
  if (!visible) throw http::ApiError("snapshot_not_found", field + ": no snapshot " + digest);
  run.workspace_snapshot = store->lease(digest);
  run.pinned.workspace_digest = digest;
}

}  // namespace capsule::daemon

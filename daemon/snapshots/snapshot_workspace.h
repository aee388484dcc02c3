// A run's or session's snapshot workspace: {"snapshot": digest} leased from the store (the caller's own, or any
// for root and the admin group), or a `reproducible` run's directory snapshotted at submit as the caller.
#pragma once

#include "daemon/auth.h"
#include "daemon/resolve.h"
#include "daemon/snapshots/snapshot_store.h"

namespace capsule::daemon {

// Sets run.workspace_snapshot and run.pinned.workspace_digest when the workspace is a snapshot, or the run is
// reproducible (a stored run's pinned.workspace_digest is used as given: the same bytes again). Call after
// authorize_workspace. Throws ApiError 404 snapshot_not_found (unknown, or another user's), 409 pin_mismatch, and
// what creating a snapshot throws (403, 413, ...). Nothing to do for other workspaces.
void attach_snapshot_workspace(Submission& run, SnapshotStore* store, const AccessPolicy& access);

// True when attaching may take long (a directory to snapshot): the caller should do it on a worker.
bool snapshots_at_submit(const Submission& run);

}  // namespace capsule::daemon

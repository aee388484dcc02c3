// Importing an audit bundle: every file checked against bundle.json and the run's pins, the images, snapshot and
// dependency objects put in their stores, and the run stored as a finished run of the importer with its original
// id, marked "imported". All or nothing: a failure removes what this import added.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/auth.h"
#include "daemon/bundle/bundle_stores.h"
#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"
#include "spec/limits.h"

namespace capsule::daemon {

class SnapshotStore;

struct BundleImport {
  int fd = -1;           // the bundle tar, opened as the importer
  std::string from;      // how the importer named it (recorded in imported.from)
  Caller importer;       // becomes the run's peer
  pid_t importer_pid = 0;
};

// Returns the stored run object. Throws http::ApiError: 400 invalid_bundle naming the entry or field at fault
// (a hostile tar, a digest mismatch, a file bundle.json names that is not in the bundle, a run object that does
// not parse), 413 bundle_too_large, 409 run_exists when a run with that id is already in the ledger.
nlohmann::json import_bundle(const BundleImport& request, BundleStores& stores, SnapshotStore* snapshots,
                             Ledger& ledger, LogStore& logs, const spec::LimitPolicy& limits);

}  // namespace capsule::daemon

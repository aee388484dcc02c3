// Exporting a finished run as an audit bundle: bundle.json (the run object, its images, snapshot, dependency
// objects and logs, each with the path, sha256 and size of its file) and then those files, in a fixed order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/bundle/bundle_stores.h"
#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"

namespace capsule::daemon {

class SnapshotStore;
class SnapshotLease;

struct BundleFile {
  std::string name;              // the tar entry
  std::filesystem::path source;  // where its bytes are (a store's blob, or a staged file)
  std::uint64_t size = 0;
  std::string sha256;            // hex
};

struct BundlePlan {
  nlohmann::json manifest;        // bundle.json
  std::vector<BundleFile> files;  // after bundle.json, in this order
  std::uint64_t bytes = 0;        // the files' bytes together
  std::shared_ptr<const SnapshotLease> snapshot;  // keeps the snapshot's tar from removal until it is sent
};

// Saves the run's images and logs into `staging`, leases its snapshot and lists every file. Throws http::ApiError: 409
// bundle_incomplete naming a pinned image no longer installed, a snapshot no longer stored or a dependency object
// gone from the proxy cache; 413 bundle_too_large past stores.limits.max_bytes.
BundlePlan plan_bundle(const RunRow& row, BundleStores& stores, SnapshotStore* snapshots, const LogStore& logs,
                       const std::filesystem::path& staging);

// Writes bundle.json and the files as a tar to `sink`.
void write_bundle(const BundlePlan& plan, const BundleSink& sink);

}  // namespace capsule::daemon

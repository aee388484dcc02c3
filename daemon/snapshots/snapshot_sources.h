// The sources of POST /v1/snapshots: a host directory, a tar file, or a local git repository at a commit, each
// read with the caller's own rights (its tools run as the caller) into a source tar the store canonicalises.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/auth.h"
#include "daemon/snapshots/snapshot_limits.h"

namespace capsule::daemon {

struct SnapshotSourceRequest {
  enum class Kind { kDir, kTar, kGit };
  Kind kind = Kind::kDir;
  std::string path;  // absolute host path: the directory, the tar file or the repository
  std::string rev;   // kGit: the commit-ish
};

// {"dir": PATH} | {"tar": PATH} | {"git": PATH, "rev": REV}. Throws 400 invalid_request naming the field.
SnapshotSourceRequest parse_snapshot_source(const nlohmann::json& body);

// A source made ready for SnapshotStore::create: the tar to canonicalise and how the snapshot describes it.
struct PreparedSource {
  std::filesystem::path tar;    // in `staging` (a caller's tar file is copied there: it cannot change under the checks)
  nlohmann::json description;   // {"dir": ...} | {"tar": ...} | {"git": ..., "rev": ..., "commit": <sha>}
  std::optional<std::int64_t> mtime;  // kGit: the commit's date (seconds), the tree's mtime; else unset (now)
};

// Opens the source as `caller` (403 forbidden when it may not) and, for a directory or a repository, runs tar
// or git as the caller (its uid, gid and groups; a clean environment; bounded output; a timeout) writing the
// source tar into `staging`. Throws http::ApiError: 403, 400 invalid_request / snapshot_source_failed (the tool's
// error), 413 snapshot_too_large.
PreparedSource prepare_snapshot_source(const SnapshotSourceRequest& request, const Caller& caller,
                                       const std::filesystem::path& staging, const SnapshotLimits& limits);

// The directory behind `dir` (opened as the caller: authorize_workspace) as a source tar in `staging`, written by
// tar running as `caller`; its path.
std::filesystem::path tar_directory_as(const Caller& caller, const OpenedHostPath& dir,
                                       const std::filesystem::path& staging, const SnapshotLimits& limits);

}  // namespace capsule::daemon

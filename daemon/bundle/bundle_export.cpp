// plan_bundle gathers and hashes what a run's bundle holds before any byte is sent, so every refusal is a clean
// answer; write_bundle then only copies. Images are saved with ImageStore::save (deterministic), logs decompressed.
#include "daemon/bundle/bundle_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include "base/error.h"
#include "base/unique_fd.h"
#include "daemon/snapshots/snapshot_store.h"
#include "http/response.h"
#include "spec/capsule_version.h"
#include "store/digest.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void incomplete(const std::string& message) { throw http::ApiError("bundle_incomplete", message); }

// sha256 hex and size of a file.
std::pair<std::string, std::uint64_t> hash_file(const fs::path& file) {
  base::UniqueFd fd(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) base::throw_errno("bundle", file.string(), "open");
  store::Sha256 hasher;
  std::string chunk(1 << 20, '\0');
  std::uint64_t size = 0;
  for (;;) {
    const ssize_t got = read(fd.get(), chunk.data(), chunk.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) base::throw_errno("bundle", file.string(), "read");
    if (got == 0) break;
    hasher.update(chunk.data(), static_cast<std::size_t>(got));
    size += static_cast<std::uint64_t>(got);
  }
  return {hasher.finish().hex(), size};
}

json file_json(const BundleFile& file) { return {{"path", file.name}, {"sha256", file.sha256}, {"size", file.size}}; }

// The stored (decompressed) log of one stream as a staged file.
BundleFile stage_log(const LogStore& logs, const std::string& id, Stream stream, const fs::path& staging) {
  const std::string name = stream_name(stream);
  const fs::path file = staging / ("log-" + name);
  base::UniqueFd out(open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) base::throw_errno("bundle", file.string(), "create");
  store::Sha256 hasher;
  std::uint64_t size = 0;
  const auto reader = logs.open_reader(id, stream);
  for (std::string piece = reader->read(1 << 20); !piece.empty(); piece = reader->read(1 << 20)) {
    hasher.update(piece);
    size += piece.size();
    if (write(out.get(), piece.data(), piece.size()) != static_cast<ssize_t>(piece.size())) {
      base::throw_errno("bundle", file.string(), "write");
    }
  }
  return {log_entry(name), file, size, hasher.finish().hex()};
}

}  // namespace

BundlePlan plan_bundle(const RunRow& row, BundleStores& stores, SnapshotStore* snapshots, const LogStore& logs,
                       const fs::path& staging) {
  BundlePlan plan;
  const json run = row.to_json();
  const json& pinned = run["pinned"];
  json images = json::array();
  std::size_t index = 0;
  const json image_digests = pinned.value("image_digests", json::array());
  for (const auto& digest : image_digests) {
    const std::string text = digest.get<std::string>();
    const fs::path archive = staging / ("image-" + std::to_string(index) + ".tar");
    try {
      stores.images.save(text, archive);
    } catch (const base::Error& e) {
      incomplete("run " + row.id + " pinned image " + text + ", which is no longer installed (" + e.what() + ")");
    }
    const auto [sha256, size] = hash_file(archive);
    plan.files.push_back({image_entry(index++), archive, size, sha256});
    json entry = file_json(plan.files.back());
    entry["digest"] = text;
    images.push_back(entry);
  }
  json snapshot;
  if (pinned.contains("workspace_digest") && pinned["workspace_digest"].is_string()) {
    const std::string digest = pinned["workspace_digest"];
    const std::optional<SnapshotInfo> info = snapshots ? snapshots->find(digest) : std::nullopt;
    if (!info) incomplete("run " + row.id + " pinned workspace snapshot " + digest + ", which is no longer stored");
    // The run's own submitter made or used it (attach_snapshot_workspace checked); root's runs may use any.
    const bool owners_own = row.peer_uid == 0 ||
                            std::find(info->owners.begin(), info->owners.end(), row.peer_uid) != info->owners.end();
    if (!owners_own) incomplete("run " + row.id + " pinned workspace snapshot " + digest + ", which its submitter does not own");
    try {
      plan.snapshot = snapshots->lease(digest);
    } catch (const http::ApiError&) {
      incomplete("run " + row.id + " pinned workspace snapshot " + digest + ", which is no longer stored");
    }
    plan.files.push_back({kSnapshotEntry, snapshots->tar_path(digest), info->size, store::Digest::parse(digest).hex()});
    snapshot = file_json(plan.files.back());
    snapshot["digest"] = digest;
    snapshot["mtime"] = snapshot_mtime_json(info->mtime);  // the importer's tree gets the same file dates
  }
  json dependencies = json::array();
  std::map<std::string, bool> listed;  // sha256 -> its file is in the plan
  const json pinned_dependencies = pinned.value("dependencies", json::array());
  for (const auto& dependency : pinned_dependencies) {
    const std::string sha256 = dependency.value("sha256", "");
    const std::uint64_t size = dependency.value("size", std::uint64_t{0});
    const std::optional<store::Digest> digest = store::Digest::try_parse("sha256:" + sha256);
    if (!digest || !stores.proxy_blobs.has(*digest) || stores.proxy_blobs.size(*digest) != size) {
      incomplete("run " + row.id + " received " + dependency.value("url", "") + " (sha256:" + sha256 +
                 "), which is no longer in the proxy cache");
    }
    if (!listed[sha256]) plan.files.push_back({dependency_entry(sha256), stores.proxy_blobs.path(*digest), size, sha256});
    listed[sha256] = true;
    dependencies.push_back({{"url", dependency.value("url", "")}, {"sha256", sha256}, {"size", size},
                            {"path", dependency_entry(sha256)}});
  }
  json log_files = json::object();
  for (const Stream stream : {Stream::kStdout, Stream::kStderr}) {
    plan.files.push_back(stage_log(logs, row.id, stream, staging));
    log_files[stream_name(stream)] = file_json(plan.files.back());
  }
  for (const BundleFile& file : plan.files) plan.bytes += file.size;
  if (plan.bytes > stores.limits.max_bytes) {
    throw http::ApiError("bundle_too_large", "run " + row.id + "'s bundle would be " + std::to_string(plan.bytes) +
                                                 " bytes, over the ceiling of " + std::to_string(stores.limits.max_bytes));
  }
  const json replayable = pinned.value("replayable", json());
  plan.manifest = {{"format", kBundleFormat},
                   {"capsule", spec::kCapsuleVersion},
                   {"run", run},
                   {"replayable", replayable.is_boolean() && replayable.get<bool>()},
                   {"not_replayable", pinned.value("not_replayable", json::array())},
                   {"images", images},
                   {"snapshot", snapshot},
                   {"dependencies", dependencies},
                   {"logs", log_files}};
  return plan;
}

void write_bundle(const BundlePlan& plan, const BundleSink& sink) {
  BundleTarWriter tar(sink);
  tar.add_bytes(kBundleManifest, plan.manifest.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  for (const BundleFile& file : plan.files) tar.add_file(file.name, file.source, file.size);
  tar.finish();
}

}  // namespace capsule::daemon

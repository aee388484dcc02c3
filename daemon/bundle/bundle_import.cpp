// import_bundle: read the tar into staging, check bundle.json against the files and the run's own pins before
// anything is stored, then store images, snapshot, dependency objects, logs and the ledger row, undoing the
// earlier steps when a later one fails.
#include "daemon/bundle/bundle_import.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/file_util.h"
#include "daemon/image_access.h"
#include "daemon/record/run_record.h"
#include "daemon/resolve.h"
#include "daemon/runs/run_manager.h"
#include "daemon/snapshots/snapshot_store.h"
#include "http/response.h"
#include "store/digest.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void invalid(const std::string& message) { throw http::ApiError("invalid_bundle", message); }

std::string read_small(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// How deeply arrays and objects nest in JSON text (strings skipped): bundle.json is refused past a small depth,
// so nothing later walks a hostile document recursively (dumping it into the ledger does).
std::size_t nesting_depth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

constexpr std::size_t kMaxManifestDepth = 64;
// A run writes a record of at most kMaxRecordBytes (run_record.h); an imported one may carry a few times that.
constexpr std::size_t kMaxImportedRecordBytes = 4 * kMaxRecordBytes;

// As the ledger and the log store take it: [A-Za-z0-9._-], not starting with '.', at most 64 characters.
bool valid_run_id(const std::string& id) {
  return valid_entry_name(id) && id.size() <= 64 && id.front() != '.' && id.find('/') == std::string::npos;
}

// The files bundle.json names, each checked against the entry of that name.
class NamedFiles {
 public:
  explicit NamedFiles(const std::map<std::string, StagedEntry>& entries) : entries_(entries) {}

  const StagedEntry& take(const json& file, const std::string& field) {
    if (!file.is_object() || !file.contains("path") || !file["path"].is_string() || !file.contains("sha256") ||
        !file["sha256"].is_string() || !file.contains("size") || !file["size"].is_number_unsigned()) {
      invalid("bundle.json " + field + ": must be {path, sha256, size}");
    }
    const std::string path = file["path"];
    const auto found = entries_.find(path);
    if (path == kBundleManifest || found == entries_.end()) {
      invalid("bundle.json " + field + ".path: '" + path + "' is not a file of the bundle");
    }
    if (found->second.sha256 != file["sha256"].get<std::string>() || found->second.size != file["size"].get<std::uint64_t>()) {
      invalid("bundle.json " + field + ": '" + path + "' is " + std::to_string(found->second.size) + " bytes with sha256 " +
              found->second.sha256 + ", not what bundle.json lists");
    }
    used_.insert(path);
    return found->second;
  }

  // Every entry but bundle.json must have been named.
  void check_all_named() const {
    for (const auto& [name, entry] : entries_) {
      if (name != kBundleManifest && !used_.count(name)) invalid("entry '" + name + "': not named by bundle.json");
    }
  }

 private:
  const std::map<std::string, StagedEntry>& entries_;
  std::set<std::string> used_;
};

std::int64_t time_of(const json& times, const char* name, bool required) {
  const json value = times.is_object() ? times.value(name, json()) : json();
  if (value.is_number_integer()) return value.get<std::int64_t>();
  if (!required && value.is_null()) return -1;
  invalid(std::string("bundle.json run.times.") + name + ": must be Unix milliseconds");
}

// What this import added, taken back unless it completes.
struct Undo {
  BundleStores& stores;
  SnapshotStore* snapshots;
  LogStore& logs;
  uid_t importer;
  std::vector<std::string> refs;
  std::optional<std::string> snapshot;
  std::vector<store::Digest> blobs;
  std::string logs_of;
  bool done = false;

  ~Undo() {
    if (done) return;
    for (const auto& ref : refs) {
      try {
        stores.images.remove(ref);
      } catch (const std::exception&) {
      }
    }
    try {
      if (snapshot) snapshots->remove(*snapshot, importer);
    } catch (const std::exception&) {
    }
    for (const auto& digest : blobs) stores.proxy_blobs.remove(digest);
    try {
      if (!logs_of.empty()) logs.remove(logs_of);
    } catch (const std::exception&) {
    }
  }
};

void copy_log(LogStore& logs, const std::string& id, Stream stream, const fs::path& file) {
  const auto writer = logs.open_writer(id, stream);
  std::ifstream in(file, std::ios::binary);
  std::string chunk(1 << 20, '\0');
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    writer->append(std::string_view(chunk.data(), static_cast<std::size_t>(in.gcount())));
  }
  writer->close();
}

}  // namespace

json import_bundle(const BundleImport& request, BundleStores& stores, SnapshotStore* snapshots, Ledger& ledger,
                   LogStore& logs, const spec::LimitPolicy& limits) {
  base::ScopedDir staging(stores.make_staging());
  const std::map<std::string, StagedEntry> entries = read_bundle_tar(request.fd, staging.path, stores.limits);
  const auto manifest_entry = entries.find(kBundleManifest);
  if (manifest_entry == entries.end()) invalid("the bundle has no bundle.json");
  if (manifest_entry->second.size > stores.limits.max_manifest_bytes) {
    invalid("bundle.json: over " + std::to_string(stores.limits.max_manifest_bytes) + " bytes");
  }
  const std::string manifest_text = read_small(manifest_entry->second.file);
  if (nesting_depth(manifest_text) > kMaxManifestDepth) {
    invalid("bundle.json: nested deeper than " + std::to_string(kMaxManifestDepth) + " levels");
  }
  const json manifest = json::parse(manifest_text, nullptr, false);
  if (!manifest.is_object()) invalid("bundle.json: not a JSON object");
  if (manifest.value("format", json()) != kBundleFormat) invalid(std::string("bundle.json format: must be ") + kBundleFormat);

  // The run object: an id that can name a run, a final state, and a spec and pins a replay can submit.
  const json run = manifest.value("run", json());
  if (!run.is_object() || !run.contains("id") || !run["id"].is_string()) invalid("bundle.json run: must be a run object");
  const std::string id = run["id"];
  if (!valid_run_id(id)) invalid("bundle.json run.id: '" + id + "' cannot name a run");
  const std::string state = run.value("state", json("")).is_string() ? run.value("state", "") : "";
  const auto& states = run_states();
  if (state == "queued" || state == "running" || std::find(states.begin(), states.end(), state) == states.end()) {
    invalid("bundle.json run.state: '" + state + "' is not the state of a finished run");
  }
  Submission submission;
  try {
    submission = parse_submission({{"spec", run.value("spec", json())}, {"pinned", run.value("pinned", json())}}, limits);
  } catch (const std::exception& e) {
    invalid(std::string("bundle.json run: ") + e.what());
  }
  const spec::Pinned& pinned = submission.pinned;
  std::map<std::string, std::string> labels;
  const json run_labels = run.value("labels", json::object());
  if (!run_labels.is_object()) invalid("bundle.json run.labels: must be an object");
  for (const auto& [key, value] : run_labels.items()) {
    if (!value.is_string()) invalid("bundle.json run.labels." + key + ": must be a string");
    labels[key] = value.get<std::string>();
  }
  const json times = run.value("times", json());
  const std::int64_t created = time_of(times, "created", true);
  const std::int64_t started = time_of(times, "started", false);
  const std::int64_t finished = time_of(times, "finished", true);

  // Every file: named, of the listed digest, and what the run pinned.
  NamedFiles files(entries);
  const json images = manifest.value("images", json::array());
  if (!images.is_array() || images.size() != pinned.image_digests.size()) {
    invalid("bundle.json images: must list the run's " + std::to_string(pinned.image_digests.size()) + " pinned images");
  }
  std::vector<const StagedEntry*> image_files;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const std::string field = "images[" + std::to_string(i) + "]";
    image_files.push_back(&files.take(images[i], field));
    if (images[i].value("digest", json()) != pinned.image_digests[i]) {
      invalid("bundle.json " + field + ".digest: must be the run's pinned " + pinned.image_digests[i]);
    }
  }
  const json snapshot = manifest.value("snapshot", json());
  const StagedEntry* snapshot_file = nullptr;
  std::optional<std::int64_t> snapshot_mtime;
  if (!snapshot.is_null() || pinned.workspace_digest) {
    if (!pinned.workspace_digest || !snapshot.is_object() || snapshot.value("digest", json()) != *pinned.workspace_digest) {
      invalid("bundle.json snapshot: must be the run's pinned workspace_digest " + pinned.workspace_digest.value_or("(none)"));
    }
    snapshot_file = &files.take(snapshot, "snapshot");
    if (snapshot.contains("mtime")) {  // bundles from before snapshots had one: the import's time
      snapshot_mtime = parse_snapshot_mtime(snapshot["mtime"]);
      if (!snapshot_mtime) invalid("bundle.json snapshot.mtime: must be an RFC 3339 time in whole seconds after 1970");
    }
    if (snapshots == nullptr) throw http::ApiError("not_implemented", "this capsuled has no snapshot store");
  }
  std::map<std::string, const StagedEntry*> dependency_files;  // sha256 hex -> file
  const json dependencies = manifest.value("dependencies", json::array());
  if (!dependencies.is_array()) invalid("bundle.json dependencies: must be an array");
  for (std::size_t i = 0; i < dependencies.size(); ++i) {
    const StagedEntry& file = files.take(dependencies[i], "dependencies[" + std::to_string(i) + "]");
    dependency_files[file.sha256] = &file;
  }
  // What a replay's frozen proxy serves: the pinned objects, and those the record's proxy.served names.
  std::vector<spec::Dependency> required = pinned.dependencies;
  const json served = run.contains("proxy") && run["proxy"].is_object() ? run["proxy"].value("served", json()) : json();
  if (!served.is_null()) {
    try {
      const std::vector<spec::Dependency> from_record = spec::dependencies_of(served);
      required.insert(required.end(), from_record.begin(), from_record.end());
    } catch (const std::exception& e) {
      invalid(std::string("bundle.json run.proxy.served: ") + e.what());
    }
  }
  for (const spec::Dependency& dependency : required) {
    if (!dependency_files.count(dependency.sha256)) {
      invalid("bundle.json dependencies: the run received " + dependency.url + " (sha256:" + dependency.sha256 +
              "), which the bundle does not hold");
    }
  }
  const json log_files = manifest.value("logs", json::object());
  std::map<Stream, const StagedEntry*> log_of;
  for (const Stream stream : {Stream::kStdout, Stream::kStderr}) {
    const std::string name = stream_name(stream);
    log_of[stream] = &files.take(log_files.is_object() ? log_files.value(name, json()) : json(), "logs." + name);
  }
  files.check_all_named();

  json outcome = json::object();
  for (const char* section : {"result", "tests", "diff", "proxy", "classfiles", "coverage", "collect_error", "record_error",
                              "test_config_changes", "protect_violations", "baseline"}) {
    if (run.contains(section) && !run[section].is_null()) outcome[section] = run[section];
  }
  const json peer = run.value("peer", json());
  const auto id_of = [&peer](const char* key) {
    return peer.is_object() && peer.contains(key) && peer[key].is_number_integer() ? peer[key].get<std::int64_t>() : 0;
  };
  outcome["imported"] = {{"at", unix_ms()}, {"from", request.from}, {"peer", {{"uid", id_of("uid")}, {"pid", id_of("pid")}}}};
  if (json_size(outcome) > kMaxImportedRecordBytes) {
    invalid("bundle.json run: its record is over " + std::to_string(kMaxImportedRecordBytes) + " bytes");
  }

  std::lock_guard lock(stores.import_mutex);
  if (ledger.get(id)) throw http::ApiError("run_exists", "a run with id " + id + " is already stored here");
  Undo undo{stores, snapshots, logs, request.importer.uid, {}, {}, {}, {}, false};
  for (std::size_t i = 0; i < image_files.size(); ++i) {
    const std::string ref = "bundle:" + id + "-" + std::to_string(i);
    store::Digest digest;
    try {
      // The bundle's images are the importer's, private as its run is (image_access.h).
      digest = stores.images.import_archive(image_files[i]->file, ref, ref_write(request.importer, {}, RefOrigin::kBundle));
    } catch (const http::ApiError&) {
      throw;
    } catch (const base::Error& e) {
      invalid("images[" + std::to_string(i) + "] ('" + image_entry(i) + "'): " + e.what());
    }
    undo.refs.push_back(ref);
    if (digest.str() != pinned.image_digests[i]) {
      invalid("images[" + std::to_string(i) + "] ('" + image_entry(i) + "'): holds image " + digest.str() + ", not " +
              pinned.image_digests[i]);
    }
  }
  if (snapshot_file) {
    const std::optional<SnapshotInfo> before = snapshots->find(*pinned.workspace_digest);
    const bool claimed = before && std::find(before->owners.begin(), before->owners.end(), request.importer.uid) !=
                                       before->owners.end();
    SnapshotInfo info;
    try {
      info = snapshots->create(snapshot_file->file, {{"bundle", request.from}}, request.importer.uid, snapshot_mtime);
    } catch (const http::ApiError& e) {
      throw http::ApiError(e.code() == "invalid_archive" ? "invalid_bundle" : e.code(), std::string("snapshot.tar: ") + e.what());
    }
    if (!claimed) undo.snapshot = info.digest;
    if (info.digest != *pinned.workspace_digest) {
      invalid("snapshot ('snapshot.tar'): its tree is " + info.digest + ", not " + *pinned.workspace_digest);
    }
  }
  for (const auto& [sha256, file] : dependency_files) {
    const store::Digest digest = store::Digest::from_hex(sha256);
    const bool had = stores.proxy_blobs.has(digest);
    try {
      stores.proxy_blobs.put_file(file->file, digest, file->size);
    } catch (const base::Error& e) {
      invalid(dependency_entry(sha256) + ": " + e.what());
    }
    if (!had) undo.blobs.push_back(digest);
  }
  undo.logs_of = id;
  for (const auto& [stream, file] : log_of) copy_log(logs, id, stream, file->file);

  ledger.insert_queued(id, spec::to_json(submission.spec), spec::to_json(pinned), labels, request.importer.uid,
                       request.importer_pid, created);
  ledger.mark_running(id, started < 0 ? created : started);
  ledger.mark_finished(id, state, outcome, finished);
  undo.done = true;
  return ledger.get(id)->to_json();
}

}  // namespace capsule::daemon

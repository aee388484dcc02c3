// What `capsule batch submit` reads: a JSONL file of run specs (the API's request form, each with an optional
// "key"), or a directory of .json / .jsonl files; and how each spec is pinned so that it travels by digest.
#pragma once

#include <nlohmann/json.hpp>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "client/batch/batch_dir.h"
#include "http/unix_client.h"

namespace capsule::client::batch {

// One spec as read: its key (given, or "<file>:<line>"), the request body without "key", and where it was.
struct InputSpec {
  std::string key;
  nlohmann::json body;
  std::string where;  // "file:line", for messages
};

// Reads FILE (one JSON object per line; blank lines and lines starting with '#' skipped) or every *.json
// (one object) and *.jsonl file of a directory, in name order. Throws std::runtime_error naming file and line for
// a line that is not a JSON object, a key that is not 1-128 of [A-Za-z0-9_.:/@+-] or repeats, a spec over
// kMaxSpecBytes, more than kMaxSpecs specs, or no spec at all.
std::vector<InputSpec> read_input(const std::string& path);

// A key is 1 to 128 characters of [A-Za-z0-9_.:/@+-].
bool valid_key(const std::string& key);

// Pins a spec through capsuled so that every node runs the same bytes: an image or layer given by name becomes
// its manifest digest ("sha256:..."), and a copy-on-write host-directory workspace becomes a snapshot of it
// ({"snapshot": "sha256:..."}; with the caller's rights, as POST /v1/snapshots reads it). A spec choosing its
// images by `toolchains` becomes the stored-run form {"spec", "pinned"} with the images the local capsuled
// chooses (GET /v1/toolchains/resolve), its layers stacked after them. A spec given as {"spec", "pinned"} (a
// stored run) is kept as it is. Throws http errors naming the spec.
// What one submission has already asked capsuled, so a million specs naming one image ask once.
struct PinCache {
  std::map<std::string, std::string> image_digests;  // image ref -> manifest digest
  std::map<std::string, nlohmann::json> toolchains;  // resolve query -> its "pinned"
  // Where each workspace snapshot is reported as it is pinned ("snapshot 3/20 DIR: reused sha256:... (0.1 s)" or
  // "... made sha256:... (12.0 s, 3400 files)"), out of `snapshots_total`; nullptr: nowhere.
  std::ostream* progress = nullptr;
  std::size_t snapshots_total = 0;
  std::size_t snapshots_done = 0;
};
nlohmann::json pin_spec(const http::HttpClient& client, const InputSpec& input, PinCache& cache);

// How many of `inputs` pin_spec snapshots (a copy-on-write host-directory workspace): PinCache::snapshots_total.
std::size_t workspace_snapshots(const std::vector<InputSpec>& inputs);

// The manifest digest of a pinned spec: sha256 of its canonical JSON (keys sorted, no spaces) without
// "labels", which never change what runs. Equal digests name the same image bytes, workspace bytes, command,
// limits, network and cutoff.
std::string manifest_digest(const nlohmann::json& pinned_spec);

// The workspace snapshot a pinned spec names by digest (for export to a shared directory).
std::vector<std::string> snapshot_digests(const nlohmann::json& pinned_spec);
// The images a pinned spec names by digest, its image first and then its layers, or a stored run's
// pinned.image_digests (for export likewise).
std::vector<std::string> image_digests(const nlohmann::json& pinned_spec);

}  // namespace capsule::client::batch

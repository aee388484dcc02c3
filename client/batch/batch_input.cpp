// Reading a batch's input (bounded, every problem named by file and line) and pinning each spec by digest
// through capsuled's own routes (GET /v1/images/{ref}, POST /v1/snapshots), so the CLI maps no field by hand.
#include "client/batch/batch_input.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iomanip>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "store/digest.h"

namespace capsule::client::batch {

using nlohmann::json;

namespace {

void add(std::vector<InputSpec>& out, std::map<std::string, std::string>& seen, json body, const std::string& where) {
  if (!body.is_object()) throw std::runtime_error(where + ": a spec must be a JSON object");
  std::string key;
  if (body.contains("key")) {
    if (!body["key"].is_string() || !valid_key(body["key"].get<std::string>())) {
      throw std::runtime_error(where + ": \"key\" must be 1 to 128 of A-Z a-z 0-9 _ . : / @ + -");
    }
    key = body["key"].get<std::string>();
    body.erase("key");
  } else {
    key = where;
  }
  if (!valid_key(key)) throw std::runtime_error(where + ": give the spec a \"key\" (its file name cannot be one)");
  if (auto [it, fresh] = seen.emplace(key, where); !fresh) {
    throw std::runtime_error(where + ": key '" + key + "' is also the key of " + it->second);
  }
  if (out.size() >= kMaxSpecs) throw std::runtime_error("more than " + std::to_string(kMaxSpecs) + " specs");
  out.push_back({key, std::move(body), where});
}

void read_jsonl(const fs::path& file, const std::string& name, std::vector<InputSpec>& out,
                std::map<std::string, std::string>& seen) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string where = name + ":" + std::to_string(number);
    if (line.size() > kMaxSpecBytes) throw std::runtime_error(where + ": a spec is over 1 MiB");
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    json body;
    try {
      body = json::parse(line);
    } catch (const json::parse_error& e) {
      throw std::runtime_error(where + ": not JSON: " + e.what());
    }
    add(out, seen, std::move(body), where);
  }
}

void read_json(const fs::path& file, const std::string& name, std::vector<InputSpec>& out,
               std::map<std::string, std::string>& seen) {
  std::error_code ec;
  if (fs::file_size(file, ec) > kMaxSpecBytes) throw std::runtime_error(name + ": a spec is over 1 MiB");
  std::ifstream in(file, std::ios::binary);
  json body;
  try {
    body = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(name + ": not JSON: " + e.what());
  }
  add(out, seen, std::move(body), name);
}

bool is_digest_ref(const std::string& ref) { return ref.rfind("sha256:", 0) == 0; }

std::string image_digest(const http::HttpClient& client, const std::string& ref, const std::string& where,
                         PinCache& cache) {
  if (ref == "host" || is_digest_ref(ref)) return ref;
  if (const auto known = cache.image_digests.find(ref); known != cache.image_digests.end()) return known->second;
  try {
    const json image = http::request_json(client, "GET", "/v1/images/" + http::url_encode(ref));
    return cache.image_digests[ref] = image.at("digest").get<std::string>();
  } catch (const http::ResponseError& e) {
    throw std::runtime_error(where + ": image " + ref + ": " + e.what());
  }
}

// A spec pin_spec snapshots the workspace of: a copy-on-write host directory.
bool snapshots_workspace(const json& spec) {
  if (!spec.is_object() || spec.contains("pinned") || !spec.contains("workspace") || !spec["workspace"].is_object()) {
    return false;
  }
  const json& workspace = spec["workspace"];
  return workspace.contains("path") && workspace["path"].is_string() && workspace.value("mode", "cow") == "cow";
}

void report_snapshot(PinCache& cache, const std::string& dir, const json& snapshot, double seconds) {
  ++cache.snapshots_done;
  if (cache.progress == nullptr) return;
  std::ostringstream line;
  line << "snapshot " << cache.snapshots_done << "/" << std::max(cache.snapshots_total, cache.snapshots_done) << " "
       << dir << ": " << (snapshot.value("reused", false) ? "reused " : "made ") << snapshot.value("digest", "?") << " ("
       << std::fixed << std::setprecision(1) << seconds << " s";
  if (!snapshot.value("reused", false)) line << ", " << snapshot.value("files", 0ull) << " files";
  line << ")\n";
  *cache.progress << line.str() << std::flush;
}

}  // namespace

std::size_t workspace_snapshots(const std::vector<InputSpec>& inputs) {
  return static_cast<std::size_t>(
      std::count_if(inputs.begin(), inputs.end(), [](const InputSpec& input) { return snapshots_workspace(input.body); }));
}

bool valid_key(const std::string& key) {
  static const std::regex shape("[A-Za-z0-9_.:/@+-]{1,128}");
  return std::regex_match(key, shape);
}

std::vector<InputSpec> read_input(const std::string& path) {
  std::vector<InputSpec> out;
  std::map<std::string, std::string> seen;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(path)) {
      const std::string ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".json" || ext == ".jsonl")) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      const std::string name = file.filename();
      if (file.extension() == ".jsonl") {
        read_jsonl(file, name, out, seen);
      } else {
        read_json(file, file.stem(), out, seen);  // one spec per file: its name is its default key
      }
    }
  } else if (fs::is_regular_file(path, ec)) {
    read_jsonl(path, fs::path(path).filename(), out, seen);
  } else {
    throw std::runtime_error("no batch input at " + path + " (a JSONL file or a directory of .json/.jsonl files)");
  }
  if (out.empty()) throw std::runtime_error(path + " holds no spec");
  return out;
}

// A spec choosing its image by toolchains, in the stored-run form with what the local capsuled would pin
// (GET /v1/toolchains/resolve: the same code pins runs), so every node runs the images chosen here.
json pin_toolchains(const http::HttpClient& client, json spec, const std::string& where, PinCache& cache) {
  std::string query;
  for (const auto& [name, version] : spec["toolchains"].items()) {
    if (!version.is_string()) return spec;  // the daemon's 400 names it when the spec runs
    query += query.empty() ? '?' : '&';  // appended: a const char* + string here trips GCC 12's -Wrestrict at -O3
    query += http::url_encode(name) + "=" + http::url_encode(version.get<std::string>());
  }
  if (spec.contains("as_of") && spec["as_of"].is_string()) query += "&as_of=" + http::url_encode(spec["as_of"].get<std::string>());
  auto known = cache.toolchains.find(query);
  if (known == cache.toolchains.end()) {
    try {
      known = cache.toolchains.emplace(query, http::request_json(client, "GET", "/v1/toolchains/resolve" + query).at("pinned")).first;
    } catch (const http::ResponseError& e) {
      throw std::runtime_error(where + ": toolchains " + spec["toolchains"].dump() + ": " + e.what());
    }
  }
  json pinned = known->second;
  if (spec.contains("layers") && spec["layers"].is_array()) {  // pinned above: they stack on the toolchain's images
    for (const json& layer : spec["layers"]) pinned["image_digests"].push_back(layer);
  }
  if (spec.value("network", "") == "proxy" && spec.contains("as_of")) pinned["cutoff"] = spec["as_of"];
  return json{{"spec", std::move(spec)}, {"pinned", std::move(pinned)}};
}

json pin_spec(const http::HttpClient& client, const InputSpec& input, PinCache& cache) {
  json spec = input.body;
  if (spec.contains("pinned")) return spec;  // a stored run: its pins are the daemon's to check
  if (spec.contains("image") && spec["image"].is_string()) {
    spec["image"] = image_digest(client, spec["image"].get<std::string>(), input.where, cache);
  }
  if (spec.contains("layers") && spec["layers"].is_array()) {
    for (json& layer : spec["layers"]) {
      if (layer.is_string()) layer = image_digest(client, layer.get<std::string>(), input.where, cache);
    }
  }
  if (snapshots_workspace(spec)) {
    json& workspace = spec["workspace"];
    const std::string dir = workspace["path"].get<std::string>();
    try {
      const auto start = std::chrono::steady_clock::now();
      const json snapshot = http::request_json(client, "POST", "/v1/snapshots", {{"dir", dir}});
      workspace.erase("path");
      workspace.erase("mode");
      workspace["snapshot"] = snapshot.at("digest").get<std::string>();
      report_snapshot(cache, dir, snapshot, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    } catch (const http::ResponseError& e) {
      throw std::runtime_error(input.where + ": workspace " + workspace["path"].dump() + ": " + e.what());
    }
  }
  if (spec.contains("toolchains") && spec["toolchains"].is_object() && !spec["toolchains"].empty()) {
    return pin_toolchains(client, std::move(spec), input.where, cache);
  }
  return spec;
}

std::string manifest_digest(const json& pinned_spec) {
  json manifest = pinned_spec;
  if (manifest.is_object()) {
    manifest.erase("labels");
    if (manifest.contains("spec") && manifest["spec"].is_object()) manifest["spec"].erase("labels");
  }
  return store::sha256_of(manifest.dump(-1, ' ', false, json::error_handler_t::strict)).str();
}

std::vector<std::string> snapshot_digests(const json& pinned_spec) {
  const json& spec = pinned_spec.contains("spec") ? pinned_spec["spec"] : pinned_spec;
  if (!spec.is_object() || !spec.contains("workspace") || !spec["workspace"].is_object()) return {};
  const json& workspace = spec["workspace"];
  if (workspace.contains("snapshot") && workspace["snapshot"].is_string()) return {workspace["snapshot"].get<std::string>()};
  return {};
}

std::vector<std::string> image_digests(const json& pinned_spec) {
  std::vector<std::string> out;
  if (!pinned_spec.is_object()) return out;
  if (pinned_spec.contains("pinned")) {  // a stored run: its pins name every image, base first
    const json& pinned = pinned_spec["pinned"];
    if (!pinned.is_object() || !pinned.contains("image_digests") || !pinned["image_digests"].is_array()) return out;
    for (const json& digest : pinned["image_digests"]) {
      if (digest.is_string() && is_digest_ref(digest)) out.push_back(digest);
    }
    return out;
  }
  const json& spec = pinned_spec;
  if (spec.contains("image") && spec["image"].is_string() && is_digest_ref(spec["image"])) out.push_back(spec["image"]);
  if (spec.contains("layers") && spec["layers"].is_array()) {
    for (const json& layer : spec["layers"]) {
      if (layer.is_string() && is_digest_ref(layer)) out.push_back(layer);
    }
  }
  return out;
}

}  // namespace capsule::client::batch

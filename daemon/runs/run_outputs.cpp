// RunOutputs: each finished run's uppers packed (pack_upper_layer) into one blob store, an index file per run
// naming its layers and when they expire; the sweep drops indexes, then the blobs no index names.
#include "daemon/runs/run_outputs.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "base/file_util.h"
#include "daemon/record/workspace_glob.h"
#include "http/response.h"
#include "images/toolchain_select.h"
#include "images/image_ref.h"
#include "images/upper_layer.h"

namespace capsule::daemon {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

constexpr std::int64_t kKeepDayMs = 24ll * 60 * 60 * 1000;
constexpr std::uint64_t kMaxGlobVisits = 1'000'000;  // entries one upper's globs may look at

// What the globs keep of one upper: matched regular files and the directories leading to them.
struct Selection {
  std::set<std::string> files;
  std::set<std::string> dirs;
  bool accepts(const std::string& path, bool is_dir) const { return (is_dir ? dirs : files).count(path) > 0; }
};

// The globs matched in `upper`, and in each graft (its globs with the graft's path taken off).
Selection select(const std::string& upper, const std::vector<std::string>& globs,
                 const std::map<std::string, std::string>& grafts) {
  SearchBudget budget;
  budget.visits_left = kMaxGlobVisits;
  Selection selection;
  const auto add = [&](const std::string& file) {
    selection.files.insert(file);
    for (auto slash = file.find('/'); slash != std::string::npos; slash = file.find('/', slash + 1)) {
      selection.dirs.insert(file.substr(0, slash));
    }
  };
  for (const std::string& file : glob_within(upper, globs, budget)) add(file);
  for (const auto& [at, dir] : grafts) {
    std::vector<std::string> inside;
    for (const auto& glob : globs) {
      if (glob.starts_with(at + "/")) inside.push_back(glob.substr(at.size() + 1));
    }
    if (inside.empty()) continue;
    for (const std::string& file : glob_within(dir, inside, budget)) add(at + "/" + file);
  }
  if (budget.exhausted) throw CollectError(upper, "collect.outputs: more than " + std::to_string(kMaxGlobVisits) +
                                                      " entries to search");
  return selection;
}

std::int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

RunOutputs::RunOutputs(fs::path root, OutputsPolicy policy, images::ImageStore* images)
    : root_(std::move(root)), policy_(policy), images_(images), blobs_(root_) {
  base::make_dir(root_ / "runs", 0700, "outputs");
}

fs::path RunOutputs::index_path(const std::string& run_id) const { return root_ / "runs" / (run_id + ".json"); }

std::optional<json> RunOutputs::read_index(const std::string& run_id) const {
  std::ifstream in(index_path(run_id));
  if (!in) return std::nullopt;
  json index = json::parse(in, nullptr, false);
  if (index.is_discarded() || !index.is_object()) return std::nullopt;
  return index;
}

json RunOutputs::keep(const std::string& run_id, const std::optional<std::vector<std::string>>& globs,
                      const RunUppers& uppers, std::int64_t finished_ms) {
  json outputs = {{"workspace", nullptr}, {"root", nullptr}, {"kept_until", nullptr}};
  std::vector<std::string> reasons;
  if (policy_.keep_days == 0) {
    outputs["reason"] = "this capsuled keeps no outputs (outputs_keep_days is 0)";
    return outputs;
  }
  if (globs && globs->empty()) {
    outputs["reason"] = "collect.outputs is [], which keeps nothing";
    return outputs;
  }
  std::shared_lock lock(sweeping_);
  const auto pack = [&](const char* which, const std::string& upper, bool absolute_globs,
                        const std::map<std::string, std::string>& grafts) {
    if (upper.empty()) return;
    struct stat st;
    if (lstat(upper.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;
    try {
      images::UpperLayerOptions options;
      options.id_base = uppers.id_base;
      options.id_count = uppers.id_count;
      options.epoch = finished_ms / 1000;
      options.max_bytes = policy_.max_layer_bytes;
      options.grafts.insert(grafts.begin(), grafts.end());
      if (globs) {
        std::vector<std::string> own;
        for (const auto& glob : *globs) {
          if (glob.starts_with('/') == absolute_globs) own.push_back(absolute_globs ? glob.substr(1) : glob);
        }
        if (own.empty()) return;  // collect.outputs names nothing of this upper
        options.include = [selection = select(upper, own, grafts)](const std::string& path, bool is_dir) {
          return selection.accepts(path, is_dir);
        };
      }
      if (auto layer = images::pack_upper_layer(upper, blobs_, options)) {
        outputs[which] = {{"digest", layer->digest.str()}, {"size", layer->size}, {"files", layer->files}};
      }
    } catch (const std::exception& e) {
      reasons.push_back(std::string(which) + " not kept: " + e.what());
    }
  };
  pack("workspace", uppers.workspace, false, {});
  pack("root", uppers.root, true, uppers.root_grafts);
  if (!reasons.empty()) {
    std::string joined;
    for (const auto& reason : reasons) joined += (joined.empty() ? "" : "; ") + reason;
    outputs["reason"] = joined;
  }
  if (outputs["workspace"].is_null() && outputs["root"].is_null()) return outputs;
  outputs["kept_until"] = finished_ms + static_cast<std::int64_t>(policy_.keep_days) * kKeepDayMs;
  try {
    base::write_file_atomic(index_path(run_id), outputs.dump(), "outputs", 0600);
  } catch (const std::exception& e) {
    spdlog::error("run {}: writing its outputs index failed: {}", run_id, e.what());
    return {{"workspace", nullptr}, {"root", nullptr}, {"kept_until", nullptr},
            {"reason", std::string("recording the kept outputs failed: ") + e.what()}};
  }
  return outputs;
}

KeptLayer RunOutputs::layer(const std::string& run_id, std::string_view which) const {
  const auto index = read_index(run_id);
  if (!index) {
    throw http::ApiError("outputs_not_kept", "run " + run_id + " has no kept outputs (never kept, or past " +
                                                 "their retention; see the run's \"outputs\")");
  }
  const json& entry = (*index)[std::string(which)];
  if (!entry.is_object()) {
    throw http::ApiError("outputs_not_kept", "run " + run_id + " kept no " + std::string(which) +
                                                 (which == "root" ? " filesystem" : "") + " layer (see its \"outputs\")");
  }
  const store::Digest digest = store::Digest::parse(entry.value("digest", ""));
  if (!blobs_.has(digest)) {
    throw http::ApiError("outputs_not_kept", "run " + run_id + ": its " + std::string(which) + " layer is gone");
  }
  return {digest, blobs_.path(digest)};
}

namespace {

void check_commit_ref(const images::ImageStore* images, const std::string& ref) {
  if (images == nullptr) throw http::ApiError("not_committable", "this capsuled has no image store to commit into");
  try {
    if (images::ImageRef::parse(ref).by_digest()) throw http::ApiError("invalid_ref", "ref: '" + ref + "' must be name[:tag]");
  } catch (const images::ImageError& e) {
    throw http::ApiError("invalid_ref", std::string("ref: ") + e.what());
  }
}

std::vector<store::Digest> digests_of(const std::vector<std::string>& bases) {
  std::vector<store::Digest> digests;
  for (const auto& base : bases) digests.push_back(store::Digest::parse(base));
  return digests;
}

}  // namespace

store::Digest RunOutputs::commit(const std::string& run_id, const std::vector<std::string>& bases,
                                 const std::string& ref, const images::RefWrite& write) {
  check_commit_ref(images_, ref);
  std::shared_lock lock(sweeping_);  // the layer stays until the image has its copy
  const KeptLayer root = layer(run_id, "root");
  // `created` is the epoch, not the time of the call: the same layer on the same images is the same image.
  return images_->commit_layer(digests_of(bases), blobs_, root.digest, {{std::string(images::kCommittedFromRunLabel), run_id}},
                               ref, 0, write);
}

store::Digest RunOutputs::commit_upper(const RunUppers& uppers, const std::vector<std::string>& bases,
                                       const std::string& ref, const std::map<std::string, std::string>& labels,
                                       const images::RefWrite& write) {
  check_commit_ref(images_, ref);
  std::shared_lock lock(sweeping_);
  images::UpperLayerOptions options;
  options.id_base = uppers.id_base;
  options.id_count = uppers.id_count;
  options.epoch = now_ms() / 1000;
  const auto layer = images::pack_upper_layer(uppers.root, blobs_, options);
  if (!layer) throw http::ApiError("outputs_not_kept", "nothing was written to the root filesystem to commit");
  return images_->commit_layer(digests_of(bases), blobs_, layer->digest, labels, ref, options.epoch, write);
}

OutputsSweep RunOutputs::sweep(const std::function<bool(const std::string& id)>& run_exists, std::int64_t now) {
  std::unique_lock lock(sweeping_);
  OutputsSweep report;
  struct Kept {
    std::string id;
    std::int64_t until = 0;
    std::vector<store::Digest> digests;
  };
  std::vector<Kept> kept;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_ / "runs", ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".json")) continue;
    const std::string id = name.substr(0, name.size() - 5);
    const auto index = read_index(id);
    const std::int64_t until = index ? index->value("kept_until", std::int64_t{0}) : 0;
    if (!index || until < now || !run_exists(id)) {
      fs::remove(entry.path(), ec);
      ++report.runs_dropped;
      continue;
    }
    Kept run{id, until, {}};
    for (const char* which : {"workspace", "root"}) {
      const json& layer = (*index)[which];
      if (!layer.is_object()) continue;
      if (auto digest = store::Digest::try_parse(layer.value("digest", ""))) run.digests.push_back(*digest);
    }
    kept.push_back(std::move(run));
  }
  if (policy_.max_total_bytes > 0) {
    // Layers shared by runs count once, and free their bytes only when the last run naming them goes.
    std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) { return a.until < b.until; });
    std::map<store::Digest, std::size_t> users;
    std::uint64_t total = 0;
    for (const auto& run : kept) {
      for (const auto& digest : run.digests) {
        if (users[digest]++ == 0 && blobs_.has(digest)) total += blobs_.size(digest);
      }
    }
    while (!kept.empty() && total > policy_.max_total_bytes) {
      for (const auto& digest : kept.front().digests) {
        if (--users[digest] == 0 && blobs_.has(digest)) total -= std::min(total, blobs_.size(digest));
      }
      fs::remove(index_path(kept.front().id), ec);
      ++report.runs_dropped;
      kept.erase(kept.begin());
    }
  }
  std::set<store::Digest> named;
  for (const auto& run : kept) named.insert(run.digests.begin(), run.digests.end());
  for (const auto& digest : blobs_.list()) {
    if (named.count(digest)) continue;
    const std::uint64_t size = blobs_.size(digest);
    if (blobs_.remove(digest)) {
      ++report.blobs_removed;
      report.bytes_freed += size;
    }
  }
  return report;
}

}  // namespace capsule::daemon

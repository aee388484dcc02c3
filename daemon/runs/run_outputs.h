// RunOutputs: what a run wrote (its workspace and root filesystem upper layers) kept after it as content-
// addressed layer tars under <state_dir>/outputs, with a per-run index, retention and commits into images.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "images/image_store.h"
#include "store/blob_store.h"

namespace capsule::daemon {

struct OutputsPolicy {
  std::uint64_t keep_days = 7;                 // 0: outputs are not kept
  std::uint64_t max_total_bytes = 0;           // kept layers beyond this: the oldest runs' go first; 0: no limit
  std::uint64_t max_layer_bytes = 4ull << 30;  // one upper's tar; a larger one is not kept (a reason says so)
};

// The uppers of one finished run, read while its box still holds them.
struct RunUppers {
  std::string workspace;  // a cow workspace's upper; empty: none
  std::string root;       // the root filesystem's upper; empty: none (the box was never made)
  std::uint32_t id_base = 0;  // host id of sandbox root
  std::uint32_t id_count = 65536;
  // Writable binds whose contents belong to the root layer, by path in it ("root/.m2" -> the run's m2 dir).
  std::map<std::string, std::string> root_grafts{};
};

// One kept layer of a run.
struct KeptLayer {
  store::Digest digest;
  std::filesystem::path path;  // the uncompressed tar
};

struct OutputsSweep {
  std::size_t runs_dropped = 0;
  std::size_t blobs_removed = 0;
  std::uint64_t bytes_freed = 0;
};

// Layout under root: blobs/sha256/<hex> (layer tars, shared by runs with equal uppers), tmp/, runs/<id>.json
// (the run's "outputs" object). A blob no index names is removed by sweep(). Thread-safe: keeps run at once;
// a sweep waits for them (and they for it), so it never removes a blob whose index is still to be written.
class RunOutputs {
 public:
  RunOutputs(std::filesystem::path root, OutputsPolicy policy, images::ImageStore* images = nullptr);

  // Packs the uppers (only what `globs` names, see RunSpec::output_globs) and returns the record's "outputs":
  // {"workspace": {"digest", "size", "files"} | null, "root": {...} | null, "kept_until": ms | null,
  //  "reason"?: why something is not kept}. Never throws: a failure is a reason, never a failed run.
  nlohmann::json keep(const std::string& run_id, const std::optional<std::vector<std::string>>& globs,
                      const RunUppers& uppers, std::int64_t finished_ms);

  // The run's kept layer `which` ("workspace" or "root"). Throws http::ApiError 404 outputs_not_kept saying why
  // (never kept, expired, not that layer).
  KeptLayer layer(const std::string& run_id, std::string_view which) const;

  // Commits the run's root layer onto `bases` (its pinned image digests, base first) as image `ref`, labelled
  // org.capsule.committed.from_run, the ref pointed with `write` (the committer's, daemon/image_access.h).
  // Throws ApiError (outputs_not_kept, invalid_ref, not_committable) or images::ImageError.
  store::Digest commit(const std::string& run_id, const std::vector<std::string>& bases, const std::string& ref,
                       const images::RefWrite& write);
  // Commits a live upper (a session's root filesystem, its box frozen) likewise: packed as keep() packs, with no
  // cap, labelled with `labels`. Its blob here is indexed by no run: the next sweep removes it (the image keeps a copy).
  // Throws ApiError (invalid_ref, outputs_not_kept: nothing written) or images::ImageError.
  store::Digest commit_upper(const RunUppers& uppers, const std::vector<std::string>& bases, const std::string& ref,
                             const std::map<std::string, std::string>& labels, const images::RefWrite& write);

  // Drops the index of every run `run_exists` denies or whose kept_until passed, then the oldest while the
  // kept layers exceed max_total_bytes, then every blob no remaining index names.
  OutputsSweep sweep(const std::function<bool(const std::string& id)>& run_exists, std::int64_t now_ms);

  const OutputsPolicy& policy() const { return policy_; }

 private:
  std::filesystem::path index_path(const std::string& run_id) const;
  std::optional<nlohmann::json> read_index(const std::string& run_id) const;

  std::filesystem::path root_;
  OutputsPolicy policy_;
  images::ImageStore* images_;
  store::BlobStore blobs_;
  mutable std::shared_mutex sweeping_;  // keep() shared, sweep() exclusive
};

}  // namespace capsule::daemon

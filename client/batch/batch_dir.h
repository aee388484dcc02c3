// A batch on disk: a directory every node of a cluster reads (its specs, pinned at submit) and writes (one
// results file per chunk), and the values stored there, each parsed and printed in this one place.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace capsule::client::batch {

namespace fs = std::filesystem;

// A batch holds at most this many specs, each at most kMaxSpecBytes of JSON; a results line at most
// kMaxResultBytes (a run object is at most 4 MiB). Larger input is refused, larger lines are skipped as corrupt.
inline constexpr std::size_t kMaxSpecs = 1000000;
inline constexpr std::size_t kMaxSpecBytes = 1u << 20;
inline constexpr std::size_t kMaxResultBytes = 8u << 20;

// One spec of the batch: its key (unique in the batch), the spec as it will be submitted (names pinned to
// digests at submit), and its manifest digest (the cache key: equal manifests run the same thing).
struct BatchSpec {
  std::string key;
  nlohmann::json spec;
  std::string manifest;  // "sha256:<hex>"
};

// What `capsule batch submit` decided; written once.
struct BatchMeta {
  std::string id;
  std::string engine;  // "local", "slurm" or "none" (workers started by something else)
  std::string created;  // RFC 3339 UTC
  std::size_t specs = 0;
  std::size_t chunk_size = 1;
  int concurrency = 1;          // runs at once per worker (per node for slurm)
  std::string partition;        // slurm
  std::string socket;           // capsuled's socket for the workers; empty: each node's default
  bool rerun = false;           // run even when the cache holds a result for the manifest
  std::string source;           // the input file or directory, as given

  std::size_t chunks() const { return specs == 0 ? 0 : (specs + chunk_size - 1) / chunk_size; }
};
nlohmann::json to_json(const BatchMeta& meta);
BatchMeta parse_meta(const nlohmann::json& body);  // throws std::runtime_error naming the field

// How one spec ended: a line of results/chunk-N.jsonl (and, by manifest, of the cache).
struct BatchResult {
  std::string key;
  std::string manifest;
  std::string node;    // the host that ran it
  std::string run_id;
  std::string state;   // the run's final state (succeeded, failed, timed_out, ...)
  std::optional<int> exit_code;
  std::uint64_t wall_ms = 0;
  std::string reason;
  std::string finished;  // RFC 3339 UTC, when the result was written
  std::map<std::string, std::string> labels;  // the spec's own labels
  // Taken from the cache instead of run: {"batch", "key", "run_id", "node"} of the run it came from.
  std::optional<nlohmann::json> cached_from;
  nlohmann::json run;  // the run object as capsuled answered it (null for none)
};
nlohmann::json to_json(const BatchResult& result);
BatchResult parse_result(const nlohmann::json& body);  // throws std::runtime_error naming the field

// A worker's launch: a local process (pid and its start time, which tells a reused pid apart) or a Slurm job.
struct Launch {
  std::string engine;
  int pid = 0;
  std::string start_time;  // /proc/<pid>/stat field 22
  std::string slurm_job;
  std::string launched;    // RFC 3339 UTC
};
nlohmann::json to_json(const Launch& launch);
Launch parse_launch(const nlohmann::json& body);

// Where batches live: $CAPSULE_BATCH_ROOT, else $XDG_DATA_HOME/capsule/batches (~/.local/share/...). A Slurm
// batch's root must be a directory every node sees at the same path.
std::string default_batch_root();
// "b-<UTC yyyymmdd-hhmmss>-<8 hex>".
std::string new_batch_id();
std::string utc_now();
// The node a result comes from: the Slurm node a task runs on ($SLURMD_NODENAME: several slurmd may share one
// host), else this host's name.
std::string node_name();

class BatchDir {
 public:
  // Opens an existing batch; throws std::runtime_error("no batch ID in ROOT") when it is not there. The id
  // must look like new_batch_id()'s, so no path is built from anything else.
  BatchDir(const fs::path& root, const std::string& id);
  // Writes a new batch whole (into a temporary sibling renamed into place) and opens it.
  static BatchDir create(const fs::path& root, const BatchMeta& meta, const std::vector<BatchSpec>& specs);

  const BatchMeta& meta() const { return meta_; }
  const fs::path& path() const { return dir_; }
  fs::path logs_dir() const { return dir_ / "logs"; }
  fs::path cache_dir() const { return root_ / "cache"; }
  // The specs in input order, or those at [first, first + count): a Slurm task parses its chunk's lines only,
  // so its memory does not grow with the batch. Throws when specs.jsonl does not hold meta().specs lines.
  std::vector<BatchSpec> specs(std::size_t first = 0, std::size_t count = SIZE_MAX) const;

  // Every result written so far, by key (a later line for a key replaces an earlier one), or one chunk's only.
  // Lines that do not parse (a crash mid-write) are skipped and counted in *corrupt when given.
  std::map<std::string, BatchResult> results(std::size_t* corrupt = nullptr,
                                             std::optional<std::size_t> chunk = std::nullopt) const;
  // The results file of chunk i, opened for appending and locked (flock) for this process; nullopt when another
  // process holds it (a worker on that chunk is alive).
  std::optional<base::UniqueFd> lock_chunk(std::size_t index) const;
  // Appends one line with one write(2) to a file lock_chunk() opened.
  static void append_result(int fd, const BatchResult& result);
  // True when some process holds chunk i's lock.
  bool chunk_locked(std::size_t index) const;

  // The cache shared by the batches of a root: the result of a manifest that ran, if any.
  std::optional<BatchResult> cached(const std::string& manifest) const;
  void store_in_cache(const BatchResult& result) const;

  std::vector<Launch> launches() const;
  void add_launch(const Launch& launch) const;
  // `capsule batch cancel` marks the batch so that no worker starts another spec of it.
  bool cancelled() const;
  void mark_cancelled(bool cancelled) const;

 private:
  BatchDir(fs::path root, fs::path dir, BatchMeta meta);
  fs::path root_;
  fs::path dir_;
  BatchMeta meta_;
};

// True for the final states worth keeping: the command's own ending or its refusal (setup_failed). A run
// cancelled, interrupted by a daemon restart or ended by capsule's internal error is left without a result, so
// that resuming runs it again.
bool is_result_state(const std::string& state);

}  // namespace capsule::client::batch

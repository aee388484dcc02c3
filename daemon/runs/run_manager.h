// RunManager: admits runs (bounded queue, maximum concurrency), starts them on a few start threads, supervises
// every running sandbox from ONE thread (a poll loop over all of them); finisher threads record the results.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "daemon/runs/disk_guard.h"
#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"
#include "daemon/runs/worker_pool.h"
#include "daemon/runs/run_outputs.h"
#include "daemon/runs/run_proxy.h"
#include "daemon/resolve.h"
#include "sandbox/launcher.h"

namespace capsule::daemon {

struct RunManagerOptions {
  std::size_t max_concurrent = 8;
  std::size_t max_queue = 256;
  std::string state_dir;           // its filesystem's free space is checked against `storage` at each submit
  StorageWatermark storage;        // below it new runs get 507 insufficient_storage
  std::string runs_dir;      // per-run scratch (workspace upper/work), removed after the record is written
  std::string images_dir;    // the host image's cache
  std::string policies_dir;
  ImageCatalog images;       // imported images and the Python release table
  RunProxyContext proxies;   // serves network "proxy" runs; without it they are refused
  RunOutputs* outputs = nullptr;  // keeps what finished runs wrote; null: nothing is kept
  // Threads that start runs: a box the pool could not supply is made on one of them (cgroup, scratch, disk,
  // clone), so several are made at once and the supervision loop never waits for one.
  std::size_t start_threads = 4;
};

struct Peer {
  uid_t uid = 0;
  pid_t pid = 0;
};

// Counters for /metrics and /v1/health.
struct RunStats {
  std::size_t active = 0;
  std::size_t queued = 0;
  bool draining = false;
  std::map<std::string, std::uint64_t> finished_by_status;
  std::vector<double> setup_buckets_ms;          // upper bounds; the last bucket is +Inf
  std::vector<std::uint64_t> setup_bucket_counts;  // cumulative, as Prometheus wants
  double setup_sum_ms = 0;
  std::uint64_t setup_count = 0;
  sandbox::PoolStats pool;  // the launcher's boxes made ahead
};

class RunManager {
 public:
  // Called with one event object: "queued" on the submitting thread under the manager's lock, "started" on the
  // thread that started it, "stdout" and "stderr" on the supervision thread, "finished" on a finisher thread
  // once the ledger holds the final row. Output events carry the exact bytes as base64: {"event","id",
  // "data_b64"}. Must not block or call back into the manager.
  using Listener = std::function<void(const nlohmann::json& event)>;

  RunManager(sandbox::Launcher& launcher, Ledger& ledger, LogStore& logs, RunManagerOptions options);
  ~RunManager();  // cancels what still runs, waits for it to be recorded and joins the threads
  RunManager(const RunManager&) = delete;
  RunManager& operator=(const RunManager&) = delete;

  // Records the run as queued and returns its id. `listener`, if given, is attached before the run can
  // start, so it sees every event. Throws ApiError 400/404 (names that do not resolve: workspace, image,
  // policy), 429 (queue full) or 503 (draining).
  std::string submit(const Submission& submission, const Peer& peer, Listener listener = {});
  // Throws ApiError 404 (unknown) or 409 (already finished).
  void cancel(const std::string& id);
  // Attaches a listener to a live run; false when the run is not live (read the ledger instead).
  bool subscribe(const std::string& id, Listener listener);
  RunStats stats() const;
  // Where finished runs' outputs are kept (null: they are not).
  RunOutputs* outputs() const { return options_.outputs; }
  // Stops admitting runs, waits up to `grace` for live runs to finish (recorded, "finished" sent), then
  // cancels the rest and waits.
  void drain(std::chrono::milliseconds grace);

 private:
  struct Run;
  void supervise_loop();
  // One poll round over the live sandboxes; false once stopping and nothing is live.
  bool supervise_once(std::vector<std::shared_ptr<Run>>& active);
  // Pops what may start now into `started`; when the queue's front waits for disk room, when to try it again (0: none).
  std::int64_t start_queued_locked(std::vector<std::shared_ptr<Run>>& started);
  // A start whose box's disk found no room beside the live boxes' disks (sandbox::DiskBudget): the run goes back to
  // the queue's front, still queued, and is tried again in a moment (a box's end frees its disk's room). False
  // while draining: it fails its setup then, with `why`.
  bool requeue_for_disk_room(const std::shared_ptr<Run>& run, const std::string& why);
  // Starts the run, or finishes it when it cannot start; a started one goes to started_, for the loop. On a
  // start thread, or on the supervision thread when a box waits for it in the pool (or it was cancelled).
  void start_run(const std::shared_ptr<Run>& run);
  // Supervision thread: hands the run to a finisher; never blocks on collection or the ledger.
  void finish_run(const std::shared_ptr<Run>& run, sandbox::Result result);
  // Finisher thread: record, ledger, run dir, stats, "finished". Never throws.
  void complete_run(const std::shared_ptr<Run>& run, sandbox::Result result);
  // Writes the finished row; when that fails, releases the box first (a full disk) and tries again.
  void record_finished(const std::shared_ptr<Run>& run, const std::string& state, const nlohmann::json& record);
  void release_box(const std::shared_ptr<Run>& run);
  // The record's "outputs": the run's uppers packed while its box (and its disk) still holds them.
  nlohmann::json keep_outputs(const std::shared_ptr<Run>& run);
  void notify(const std::shared_ptr<Run>& run, const nlohmann::json& event);
  void wake();

  sandbox::Launcher& launcher_;
  Ledger& ledger_;
  LogStore& logs_;
  RunManagerOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::deque<std::shared_ptr<Run>> queue_;
  std::map<std::string, std::shared_ptr<Run>> live_;  // queued or running, by id
  std::size_t running_ = 0;
  std::vector<std::shared_ptr<Run>> started_;  // started on a start thread, not yet taken by the supervision loop
  std::size_t tearing_down_ = 0;  // finished runs whose box and run dir are still being removed (after the answer)
  bool draining_ = false;
  bool stopping_ = false;
  RunStats stats_;

  int wake_fd_ = -1;  // eventfd: submissions, cancels, finished runs and stop interrupt the poll
  WorkerPool starter_{"run-start", options_.start_threads};
  WorkerPool finisher_{"run-finish", 2};
  std::thread thread_;
};

// Unix time in milliseconds.
std::int64_t unix_ms();

}  // namespace capsule::daemon

// Retention of finished runs: removes the ledger rows and logs of runs older than a maximum age, then the
// oldest ones while logs + records exceed a total size; at start and periodically. Live runs are never touched.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"
#include "daemon/runs/run_outputs.h"
#include "daemon/snapshots/snapshot_store.h"

namespace capsule::daemon {

struct RetentionPolicy {
  std::uint64_t max_age_days = 0;     // 0: no age limit
  std::uint64_t max_total_bytes = 0;  // logs + records; 0: no size limit
  std::chrono::seconds interval{3600};
  bool enabled() const { return max_age_days > 0 || max_total_bytes > 0; }
};

struct RetentionCandidate {
  std::string id;
  std::int64_t finished_ms = 0;
  std::uint64_t bytes = 0;  // its record and logs
};

// The ids to remove, in order: every candidate finished more than max_age_days before `now_ms`, then more of
// the oldest while `total_bytes` (everything stored, live runs included) minus what is removed exceeds
// max_total_bytes. `oldest_first` holds finished runs only, sorted by finished_ms.
std::vector<std::string> plan_retention(const std::vector<RetentionCandidate>& oldest_first, std::uint64_t total_bytes,
                                        const RetentionPolicy& policy, std::int64_t now_ms);

struct RetentionReport {
  std::size_t removed = 0;
  std::uint64_t bytes_freed = 0;
};

// Plans with the ledger's finished runs and the log store's sizes, then removes each planned run (its row,
// then its logs). Failures on one run are logged and skipped.
RetentionReport apply_retention(Ledger& ledger, LogStore& logs, const RetentionPolicy& policy, std::int64_t now_ms);

// The outputs' sweep (RunOutputs::sweep) after the runs' retention: the outputs of runs no longer in the ledger
// (removed by retention or DELETE) and those past their time go. Failures are logged.
OutputsSweep sweep_outputs(RunOutputs& outputs, const Ledger& ledger, std::int64_t now_ms);

// Unused snapshots' collection after the runs' retention: those no kept record pins and no live run or session
// leases, unused for `retention.keep_days` or beyond its size cap (SnapshotStore::collect_garbage). Failures are
// logged.
SnapshotGcReport sweep_snapshots(SnapshotStore& snapshots, const Ledger& ledger, const SnapshotRetention& retention,
                                 std::int64_t now_ms);

struct SnapshotSweepTarget {
  SnapshotStore* store = nullptr;  // none: no snapshot collection
  SnapshotRetention retention;
};

// Calls apply_retention (and sweep_outputs with `outputs`, sweep_snapshots with `snapshots`) every policy.interval on its own thread (deleting files
// can be slow: never on the io_context); stopped and joined by the destructor. Does nothing when the policy is
// not enabled and there are no outputs.
class RetentionSweeper {
 public:
  RetentionSweeper(Ledger& ledger, LogStore& logs, RetentionPolicy policy, RunOutputs* outputs = nullptr,
                   SnapshotSweepTarget snapshots = {});
  ~RetentionSweeper();
  RetentionSweeper(const RetentionSweeper&) = delete;
  RetentionSweeper& operator=(const RetentionSweeper&) = delete;

 private:
  void loop();

  Ledger& ledger_;
  LogStore& logs_;
  const RetentionPolicy policy_;
  RunOutputs* outputs_;
  SnapshotSweepTarget snapshots_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace capsule::daemon

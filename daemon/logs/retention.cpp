// Retention: a pure plan (age first, then size, oldest finished first) applied through Ledger::remove_finished,
// which refuses queued and running runs, so a run that is live can never lose its row or logs.
#include "daemon/logs/retention.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>

#include "base/thread_name.h"

namespace capsule::daemon {
namespace {

constexpr std::int64_t kDayMs = 24ll * 60 * 60 * 1000;

std::uint64_t directory_bytes(const std::string& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

}  // namespace

std::vector<std::string> plan_retention(const std::vector<RetentionCandidate>& oldest_first, std::uint64_t total_bytes,
                                        const RetentionPolicy& policy, std::int64_t now_ms) {
  std::vector<std::string> doomed;
  const bool by_age = policy.max_age_days > 0;
  const std::int64_t cutoff_ms = now_ms - static_cast<std::int64_t>(policy.max_age_days) * kDayMs;
  for (const RetentionCandidate& run : oldest_first) {
    const bool too_old = by_age && run.finished_ms < cutoff_ms;
    const bool too_big = policy.max_total_bytes > 0 && total_bytes > policy.max_total_bytes;
    if (!too_old && !too_big) break;  // the rest are newer and the total fits
    doomed.push_back(run.id);
    total_bytes -= std::min(total_bytes, run.bytes);
  }
  return doomed;
}

RetentionReport apply_retention(Ledger& ledger, LogStore& logs, const RetentionPolicy& policy, std::int64_t now_ms) {
  RetentionReport report;
  if (!policy.enabled()) return report;
  std::vector<RetentionCandidate> candidates;
  for (const FinishedRunSize& run : ledger.finished_runs_oldest_first()) {
    candidates.push_back({run.id, run.finished_ms, run.record_bytes + logs.disk_bytes(run.id)});
  }
  const std::uint64_t total = ledger.record_bytes_total() + directory_bytes(logs.dir());
  std::map<std::string, std::uint64_t> sizes;
  for (const auto& run : candidates) sizes[run.id] = run.bytes;
  for (const std::string& id : plan_retention(candidates, total, policy, now_ms)) {
    try {
      if (ledger.remove_finished(id) != Ledger::Removal::kRemoved) continue;
      logs.remove(id);
      ++report.removed;
      report.bytes_freed += sizes[id];
    } catch (const std::exception& e) {
      spdlog::warn("retention: cannot remove run {}: {}", id, e.what());
    }
  }
  if (report.removed > 0) {
    spdlog::info("retention: removed {} finished run(s), {} bytes of logs and records", report.removed,
                 report.bytes_freed);
  }
  return report;
}

OutputsSweep sweep_outputs(RunOutputs& outputs, const Ledger& ledger, std::int64_t now_ms) {
  OutputsSweep report;
  try {
    report = outputs.sweep([&](const std::string& id) { return ledger.get(id).has_value(); }, now_ms);
  } catch (const std::exception& e) {
    spdlog::warn("retention: sweeping run outputs: {}", e.what());
  }
  if (report.blobs_removed > 0 || report.runs_dropped > 0) {
    spdlog::info("retention: dropped the outputs of {} run(s), {} layer(s), {} bytes", report.runs_dropped,
                 report.blobs_removed, report.bytes_freed);
  }
  return report;
}

SnapshotGcReport sweep_snapshots(SnapshotStore& snapshots, const Ledger& ledger, const SnapshotRetention& retention,
                                 std::int64_t now_ms) {
  SnapshotGcReport report;
  if (retention.keep_days == 0 && retention.max_total_bytes == 0) return report;
  SnapshotGc gc;
  const std::uint64_t keep_days = std::min(retention.keep_days, SnapshotRetention::kMaxKeepDays);
  if (keep_days > 0) gc.unused_before_us = (now_ms - static_cast<std::int64_t>(keep_days) * 86'400'000) * 1000;
  gc.max_total_bytes = retention.max_total_bytes;
  gc.kept_if_used_after_us = now_ms * 1000 - SnapshotRetention::kGrace;
  try {
    report = snapshots.collect_garbage([&ledger] { return ledger.pinned_workspace_digests(); }, gc);
  } catch (const std::exception& e) {
    spdlog::warn("retention: collecting unused snapshots: {}", e.what());
  }
  if (!report.removed.empty()) {
    spdlog::info("retention: removed {} unused snapshot(s), {} bytes", report.removed.size(), report.bytes_freed);
  }
  return report;
}

RetentionSweeper::RetentionSweeper(Ledger& ledger, LogStore& logs, RetentionPolicy policy, RunOutputs* outputs,
                                   SnapshotSweepTarget snapshots)
    : ledger_(ledger), logs_(logs), policy_(policy), outputs_(outputs), snapshots_(snapshots) {
  if (policy_.enabled() || outputs_ != nullptr || snapshots_.store != nullptr) thread_ = std::thread([this] {
    base::name_this_thread("retention");
    loop();
  });
}

RetentionSweeper::~RetentionSweeper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RetentionSweeper::loop() {
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, policy_.interval, [this] { return stopping_; })) {
    lock.unlock();
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    try {
      apply_retention(ledger_, logs_, policy_, now_ms);
    } catch (const std::exception& e) {
      spdlog::warn("retention: {}", e.what());
    }
    if (outputs_ != nullptr) sweep_outputs(*outputs_, ledger_, now_ms);
    if (snapshots_.store != nullptr) sweep_snapshots(*snapshots_.store, ledger_, snapshots_.retention, now_ms);
    lock.lock();
  }
}

}  // namespace capsule::daemon

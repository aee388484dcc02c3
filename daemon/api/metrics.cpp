// Formats /metrics in the Prometheus text format (version 0.0.4): HELP and TYPE lines, then samples.
// Label values here are fixed words (states), so no escaping is needed beyond what the words allow.
#include "daemon/api/metrics.h"

#include <sstream>

namespace capsule::daemon {

std::string format_metrics(const RunStats& stats, const std::map<std::string, std::uint64_t>& runs_by_state) {
  std::ostringstream out;
  out << "# HELP capsule_runs Runs recorded in the ledger, by state.\n# TYPE capsule_runs gauge\n";
  for (const auto& [state, count] : runs_by_state) out << "capsule_runs{state=\"" << state << "\"} " << count << "\n";
  out << "# HELP capsule_runs_finished_total Runs finished by this daemon process, by status.\n"
         "# TYPE capsule_runs_finished_total counter\n";
  for (const auto& [status, count] : stats.finished_by_status) {
    out << "capsule_runs_finished_total{status=\"" << status << "\"} " << count << "\n";
  }
  out << "# HELP capsule_queue_depth Runs waiting for a sandbox slot.\n# TYPE capsule_queue_depth gauge\n"
      << "capsule_queue_depth " << stats.queued << "\n"
      << "# HELP capsule_active_sandboxes Sandboxes running now.\n# TYPE capsule_active_sandboxes gauge\n"
      << "capsule_active_sandboxes " << stats.active << "\n"
      << "# HELP capsule_setup_seconds Time from request to the command's execve.\n"
      << "# TYPE capsule_setup_seconds histogram\n";
  for (std::size_t i = 0; i < stats.setup_bucket_counts.size(); ++i) {
    out << "capsule_setup_seconds_bucket{le=\"";
    if (i < stats.setup_buckets_ms.size()) {
      out << stats.setup_buckets_ms[i] / 1000.0;
    } else {
      out << "+Inf";
    }
    out << "\"} " << stats.setup_bucket_counts[i] << "\n";
  }
  out << "capsule_setup_seconds_sum " << stats.setup_sum_ms / 1000.0 << "\n"
      << "capsule_setup_seconds_count " << stats.setup_count << "\n";
  out << "# HELP capsule_pool_boxes_total Boxes made ahead for runs (sandbox pool), by what became of them.\n"
      << "# TYPE capsule_pool_boxes_total counter\n"
      << "capsule_pool_boxes_total{event=\"made\"} " << stats.pool.made << "\n"
      << "capsule_pool_boxes_total{event=\"taken\"} " << stats.pool.hits << "\n"
      << "capsule_pool_boxes_total{event=\"failed\"} " << stats.pool.failed << "\n"
      << "capsule_pool_boxes_total{event=\"expired\"} " << stats.pool.expired << "\n"
      << "capsule_pool_boxes_total{event=\"stale\"} " << stats.pool.stale << "\n"
      << "# HELP capsule_pool_misses_total Runs of a poolable environment that found no box ready.\n"
      << "# TYPE capsule_pool_misses_total counter\n"
      << "capsule_pool_misses_total " << stats.pool.misses << "\n";
  return out.str();
}

}  // namespace capsule::daemon

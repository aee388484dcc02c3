// Prometheus text exposition of the daemon's counters: runs by final status, queue depth, active
// sandboxes and the setup latency histogram.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "daemon/runs/run_manager.h"

namespace capsule::daemon {

// `runs_by_state` comes from the ledger (all runs ever recorded), `stats` from the live run manager.
std::string format_metrics(const RunStats& stats, const std::map<std::string, std::uint64_t>& runs_by_state);

}  // namespace capsule::daemon

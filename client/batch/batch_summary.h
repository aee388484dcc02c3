// A batch's summary: counts by state and by label, the duration distribution, the failures with their reasons;
// as JSON (the one shape), as text for a terminal, and as a self-contained HTML page with plots.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "client/batch/batch_dir.h"

namespace capsule::client::batch {

// {"id", "engine", "specs", "done", "pending", "cached", "corrupt_lines", "state" (running | finished |
//  incomplete | cancelled), "by_state": {state: n}, "by_label": {"k=v": {state: n}},
//  "duration_ms": {"count", "p50", "p90", "p99", "max", "histogram": [{"le_ms", "count"}]},
//  "failures": [{"key", "state", "exit_code", "reason", "run_id", "node", "output_tail": null | {"stream",
//  "lines": the last 5 non-blank lines of its stderr, else of its stdout, each cut at 300 characters}}]
//  (the first 1000)}.
// `alive`: whether workers may still run (batch_engine's workers_alive).
nlohmann::json summarize(const BatchDir& batch, bool alive);

std::string summary_text(const nlohmann::json& summary);
std::string summary_html(const nlohmann::json& summary);

}  // namespace capsule::client::batch

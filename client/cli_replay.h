// `capsule replay RUN [--repeat N] [--vary cpus,memory,order] [--json]`: one replay followed like `capsule run`,
// or N replays waited for and the flakiness report over the original and them.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace capsule::client {

struct ReplayOptions {
  std::string id;
  std::optional<int> repeat;  // unset: one replay, streamed
  std::string vary;           // "cpus,memory,order" (any of them)
  bool json = false;
  std::string workspace;      // a host path (made absolute) or a snapshot digest; empty: the original's
};

// The POST /v1/runs/{id}/replay body for these options. Throws std::invalid_argument for an unknown --vary name.
nlohmann::json build_replay_body(const ReplayOptions& options);

// GET /v1/runs/flakiness's report as a table: the verdict's flip rate, one row per test case, the flaky ones.
std::string format_flakiness_report(const nlohmann::json& report);

// Without --repeat: run_view's exit status for the replay, as `capsule run`. With it: 0 once the report (or,
// when this capsuled has none, the replays' summary lines) is printed. Throws when capsule itself fails.
int cmd_replay(const std::string& socket, const ReplayOptions& options);

}  // namespace capsule::client

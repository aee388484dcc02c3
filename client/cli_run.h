// `capsule run`: the POST /v1/runs body from the run flags, then the run's live event stream relayed to this
// process (Ctrl-C cancels the run), ending with run_view's summary line and exit status.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "client/cli_args.h"

namespace capsule::client {

// The POST /v1/runs body for these flags: only fields that were given, values passed through as typed.
// Throws std::invalid_argument for malformed K=V items, no command, or --mode without --workspace.
nlohmann::json build_run_body(const RunOptions& options);

// Starts capsuled when none listens; returns run_view's exit status for the run (0 with --detach) and throws
// (ConnectError, ResponseError, runtime_error) when capsule itself fails: main then exits 125.
int cmd_run(const std::string& socket, RunOptions options);

}  // namespace capsule::client

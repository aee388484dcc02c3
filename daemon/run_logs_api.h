// The routes over stored run records and logs: GET /v1/runs/{id}/logs (streamed from disk in bounded pieces,
// optionally following a live run) and DELETE /v1/runs/{id} (a finished run's ledger row and logs).
#pragma once

#include "daemon/api.h"

namespace capsule::daemon {

void serve_run_logs(ApiContext& ctx, const Request& request, Responder responder);
Response delete_run(ApiContext& ctx, const Request& request);
// "logs": {"stdout": {"truncated": bool[, "total_bytes", "dropped_bytes"]}, "stderr": {...}} for a run object.
nlohmann::json log_summary(const LogStore& logs, const std::string& run_id);

}  // namespace capsule::daemon

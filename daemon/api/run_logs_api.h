// The routes over stored run records and logs: GET /v1/runs/{id}/logs (streamed from disk in bounded pieces,
// optionally following a live run) and DELETE /v1/runs/{id} (a finished run's ledger row and logs).
#pragma once

#include "daemon/api/api.h"

namespace capsule::daemon {

void serve_run_logs(ApiContext& ctx, const http::Request& request, http::Responder responder);
http::Response delete_run(ApiContext& ctx, const http::Request& request);

}  // namespace capsule::daemon

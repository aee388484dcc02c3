// The capsuled API: every /v1 route and /metrics, registered on a Router, on top of the run manager,
// the ledger and the log store. docs/api.md documents each route registered here (a test checks it).
#pragma once

#include <boost/asio/io_context.hpp>
#include <string>

#include "daemon/auth.h"
#include "http/router.h"
#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"
#include "daemon/runs/run_manager.h"
#include "spec/run_spec.h"

namespace capsule::daemon {

struct ApiContext {
  boost::asio::io_context& io;  // timers for following logs
  RunManager& runs;
  Ledger& ledger;
  LogStore& logs;
  LimitPolicy limits;
  int cgroup_version = 0;
  AccessPolicy access;  // who sees every run (auth.h)
};

void register_api(http::Router& router, ApiContext& context);

// The run `id` if the caller may see it (its own; any for root and the admin group), else 404 not_found with the
// message an unknown id gets, so other users' run ids are not revealed.
RunRow require_visible_run(ApiContext& ctx, const http::Request& request, const std::string& id);

inline constexpr const char* kCapsuleVersion = "0.1.0";

}  // namespace capsule::daemon

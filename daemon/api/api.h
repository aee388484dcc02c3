// The capsuled API: what its handler files share (the context, request helpers, run visibility) and the
// registration of every resource's routes. docs/openapi.yaml describes each route (a test checks it).
#pragma once

#include <boost/asio/io_context.hpp>
#include <string>

#include "daemon/api/blocking_calls.h"
#include "daemon/auth.h"
#include "http/router.h"
#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"
#include "daemon/runs/run_manager.h"
#include "daemon/sessions/session_manager.h"
#include "spec/capsule_version.h"
#include "spec/limits.h"

namespace capsule::daemon {

class SnapshotStore;
class BundleStores;
class StackManager;

struct ApiContext {
  boost::asio::io_context& io;  // timers for following logs
  RunManager& runs;
  Ledger& ledger;
  LogStore& logs;
  spec::LimitPolicy limits;
  int cgroup_version = 0;
  AccessPolicy access;  // who sees every run (auth.h)
  SessionManager& sessions;
  ImageCatalog images{};  // the runs' catalog (resolve.h), for the toolchain routes; empty: no image store
  // Worker threads for what an io thread must not wait on (blocking_calls.h), joined when the context goes (declare
  // it after the managers). At shutdown: transfers.stop() before sessions.stop() (a transfer gives up at its next
  // piece, before its box goes), session_calls.stop() after it (their waits on the session thread end then).
  BlockingCalls session_calls{"session calls", 4, 60};  // create, delete, reset, checkpoint
  BlockingCalls transfers{"file transfers", 8, 0};      // files in and out, diffs, log tails: at most 8 at once
  SnapshotStore* snapshots = nullptr;                   // snapshots/snapshot_store.h; none: the routes answer 501
  BlockingCalls snapshot_calls{"snapshot creations", 2, 8};  // sources read as their callers, canonicalised
  BundleStores* bundles = nullptr;  // bundle/bundle_stores.h: audit bundles; none: the routes answer 501
  StackManager* stacks = nullptr;   // stacks/stack_manager.h; none: the routes answer 501
  BlockingCalls stack_calls{"stack calls", 8, 64};  // ?wait=true creations and deletes (both wait on a stack)
};

// Every /v1 route but the images' (images_api.h) and /metrics, each resource from its own file.
void register_api(http::Router& router, ApiContext& context);
void register_system_api(http::Router& router, ApiContext& context);    // system_api.cpp
void register_runs_api(http::Router& router, ApiContext& context);      // runs_api.cpp
void register_run_logs_api(http::Router& router, ApiContext& context);  // run_logs_api.cpp
void register_run_replay_api(http::Router& router, ApiContext& context);  // run_replay_api.cpp
void register_run_files_api(http::Router& router, ApiContext& context);  // run_files_api.cpp
void register_sessions_api(http::Router& router, ApiContext& context);  // sessions_api.cpp
void register_session_files_api(http::Router& router, ApiContext& context);  // session_files_api.cpp
void register_toolchains_api(http::Router& router, ApiContext& context);     // toolchains_api.cpp
void register_run_diff_api(http::Router& router, ApiContext& context);       // run_diff_api.cpp
void register_snapshots_api(http::Router& router, ApiContext& context);      // snapshots_api.cpp
void register_run_bundle_api(http::Router& router, ApiContext& context);     // run_bundle_api.cpp
void register_stacks_api(http::Router& router, ApiContext& context);         // stacks_api.cpp

// Request helpers every handler file uses.
std::string dump(const nlohmann::json& value);  // invalid UTF-8 replaced, never thrown on
nlohmann::json parse_body(const http::Request& request);  // 400 invalid_json
bool wants_ndjson(const http::Request& request);
bool query_flag(const http::Request& request, const std::string& name);  // ?name=true or ?name=1
// ?limit=N of a listing (`fallback` without one); 400 invalid_query when N is not a number.
std::size_t query_limit(const http::Request& request, std::size_t fallback);

// The run `id` if the caller may see it (its own; any for root and the admin group), else 404 not_found with the
// message an unknown id gets, so other users' run ids are not revealed.
RunRow require_visible_run(ApiContext& ctx, const http::Request& request, const std::string& id);

// For a spec with a baseline: reads the baseline run as the caller may (as GET /v1/runs/{id}) into
// run.baseline_run. Throws 404 baseline_not_found (unknown, or another user's run) or 409 run_active (not
// finished yet).
void attach_baseline(ApiContext& ctx, const http::Request& request, Submission& run);
// The baseline run as the caller may read it: its tests_view (test_loss.h). Same errors.
std::shared_ptr<const nlohmann::json> read_baseline(ApiContext& ctx, const http::Request& request,
                                                    const spec::Baseline& baseline);

// A run's stored stdout or stderr (?stream=, ?from=OFFSET or ?tail=N lines, ?follow=true), streamed (run_logs_api.cpp).
void serve_log(ApiContext& ctx, const RunRow& row, const http::Request& request, http::Responder responder);

// 404 with the answer an unknown id gets unless the caller may see the session (its own; root and admins all).
void require_visible_session(ApiContext& ctx, const http::Request& request, const std::string& id);

inline constexpr const char* kCapsuleVersion = spec::kCapsuleVersion;

}  // namespace capsule::daemon

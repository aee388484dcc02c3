// The /v1/runs resource: submit (a spec or a stored {spec, pinned}; 202, ?wait=true, or an ndjson event
// stream), list with filters and pages, get, and cancel. Handlers validate, then hand work to the run manager.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "daemon/api/api.h"
#include "daemon/api/event_lines.h"
#include "daemon/snapshots/snapshot_workspace.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

// Queues an accepted run and answers: 202 with the id, the finished run (`wait`), or a stream of events (`ndjson`).
void start_run(ApiContext& ctx, const Submission& run, const Peer& peer, bool ndjson, bool wait,
               const http::Responder& responder) {
  if (ndjson) {
    auto lines = std::make_shared<EventLines>();
    ctx.runs.submit(run, peer, [lines](const json& event) { lines->add(event); });
    lines->start(responder);
    return;
  }
  if (wait) {
    ctx.runs.submit(run, peer, [responder](const json& event) {
      if (event.value("event", "") == "finished") responder.respond(http::json_response(200, event["run"]));
    });
    return;
  }
  const std::string id = ctx.runs.submit(run, peer);
  responder.respond(http::json_response(202, {{"id", id}, {"state", "queued"}}));
}

// POST /v1/runs (a spec, or a stored run's {spec, pinned}). A reproducible run's directory is snapshotted first,
// as the caller, on a worker (snapshots/snapshot_workspace.h).
void submit_run(ApiContext& ctx, const http::Request& request, http::Responder responder) {
  Submission run = parse_submission(parse_body(request), ctx.limits);
  authorize_workspace(run, caller_of(request.peer));
  attach_baseline(ctx, request, run);
  const Peer peer{request.peer.uid, request.peer.pid};
  const bool ndjson = wants_ndjson(request);
  const bool wait = query_flag(request, "wait");
  if (snapshots_at_submit(run)) {
    answer_later(ctx.snapshot_calls, peer.uid, responder, [&ctx, run, peer, ndjson, wait](const http::Responder& answer) {
      Submission snapshotted = run;
      attach_snapshot_workspace(snapshotted, ctx.snapshots, ctx.access);
      start_run(ctx, snapshotted, peer, ndjson, wait, answer);
    });
    return;
  }
  attach_snapshot_workspace(run, ctx.snapshots, ctx.access);
  start_run(ctx, run, peer, ndjson, wait, responder);
}

// Whether a run is a stack's readiness probe (labelled capsule/probe): one every interval per service, so the
// list hides them unless asked (?include=probes, or a label filter naming capsule/probe).
bool is_probe_run(const RunRow& row) { return row.labels.is_object() && row.labels.contains("capsule/probe"); }

// A page of the runs `caller` may see (without probe runs unless `with_probes`): the ledger's pages, filtered,
// read on until `filter.limit` runs are found or the ledger has no more. `next` is the last run returned.
RunPage visible_runs(ApiContext& ctx, const Caller& caller, RunFilter filter, bool with_probes) {
  const bool sees_all = sees_all_runs(caller, ctx.access);
  if (sees_all && with_probes) return ctx.ledger.list(filter);
  const std::size_t wanted = std::clamp<std::size_t>(filter.limit, 1, Ledger::kMaxListLimit);
  filter.limit = Ledger::kMaxListLimit;
  RunPage visible;
  for (;;) {
    RunPage page = ctx.ledger.list(filter);
    for (auto& row : page.runs) {
      if (!sees_all && !may_see_run(caller, ctx.access, row.peer_uid)) continue;
      if (!with_probes && is_probe_run(row)) continue;
      if (visible.runs.size() == wanted) {
        visible.next = visible.runs.back().id;  // there is more after the last one returned
        return visible;
      }
      visible.runs.push_back(std::move(row));
    }
    if (!page.next) return visible;
    filter.after = page.next;
  }
}

http::Response list_runs(ApiContext& ctx, const http::Request& request) {
  RunFilter filter;
  if (auto it = request.query.find("state"); it != request.query.end()) {
    const auto& states = run_states();
    if (std::find(states.begin(), states.end(), it->second) == states.end()) {
      throw http::ApiError("invalid_query", "state: unknown state '" + it->second + "'");
    }
    filter.state = it->second;
  }
  if (auto it = request.query.find("label"); it != request.query.end()) {
    auto eq = it->second.find('=');
    if (eq == std::string::npos || eq == 0) throw http::ApiError("invalid_query", "label: expected KEY=VALUE");
    filter.labels[it->second.substr(0, eq)] = it->second.substr(eq + 1);
  }
  filter.limit = query_limit(request, filter.limit);
  if (auto it = request.query.find("after"); it != request.query.end()) filter.after = it->second;
  bool with_probes = filter.labels.contains("capsule/probe");
  if (auto it = request.query.find("include"); it != request.query.end()) {
    if (it->second != "probes") throw http::ApiError("invalid_query", "include: only \"probes\" (stacks' probe runs)");
    with_probes = true;
  }
  RunPage page;
  try {
    page = visible_runs(ctx, caller_of(request.peer), filter, with_probes);
  } catch (const LedgerCursorError& e) {
    throw http::ApiError("invalid_query", std::string("after: ") + e.what());
  }
  json runs = json::array();
  for (const auto& row : page.runs) runs.push_back(row.to_json());
  return http::json_response(200, {{"runs", runs}, {"next", page.next ? json(*page.next) : json(nullptr)}});
}

}  // namespace

void register_runs_api(http::Router& router, ApiContext& ctx) {
  router.add("POST", "/v1/runs", [&ctx](const http::Request& request, http::Responder responder) {
    submit_run(ctx, request, std::move(responder));
  });
  router.add("GET", "/v1/runs", [&ctx](const http::Request& request) { return list_runs(ctx, request); });
  router.add("GET", "/v1/runs/{id}", [&ctx](const http::Request& request) {
    return http::json_response(200, require_visible_run(ctx, request, request.params.at("id")).to_json());
  });
  router.add("POST", "/v1/runs/{id}/cancel", [&ctx](const http::Request& request) {
    const std::string& id = request.params.at("id");
    const RunRow row = require_visible_run(ctx, request, id);
    if (row.spec.is_object() && row.spec.contains("session")) ctx.sessions.cancel_exec(row.spec.value("session", ""), id);
    else ctx.runs.cancel(id);
    return http::json_response(202, {{"id", id}, {"state", require_visible_run(ctx, request, id).state}});
  });
}

}  // namespace capsule::daemon

// The routes comparing finished runs: GET /v1/runs/diff?a=&b=[&allow_removed=true] (record/run_diff.h) and
// GET /v1/runs/flakiness?runs=ID,... (record/flakiness.h), each over runs the caller may see.
#include <set>
#include <string>
#include <vector>

#include "daemon/api/api.h"
#include "daemon/record/flakiness.h"
#include "daemon/record/run_diff.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

constexpr std::size_t kMinFlakinessRuns = 2;
constexpr std::size_t kMaxFlakinessRuns = 100;

const std::string& required_query(const http::Request& request, const std::string& name) {
  const auto it = request.query.find(name);
  if (it == request.query.end() || it->second.empty()) {
    throw http::ApiError("invalid_query", name + ": a run id is required");
  }
  return it->second;
}

// The run object of `id` if the caller may see it (else 404 as for an unknown id) and it has finished (else
// 409 run_active: a live run has no outcome to compare yet).
json finished_run(ApiContext& ctx, const http::Request& request, const std::string& id) {
  const RunRow row = require_visible_run(ctx, request, id);
  if (row.state == "queued" || row.state == "running") {
    throw http::ApiError("run_active", "run " + id + " is " + row.state + "; wait until it has finished");
  }
  return row.to_json();
}

// ?runs=ID1,ID2,...: 2 to 100 distinct ids, else 400 invalid_query.
std::vector<std::string> flakiness_ids(const http::Request& request) {
  const std::string& text = required_query(request, "runs");
  std::vector<std::string> ids;
  std::set<std::string> seen;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string id = text.substr(start, comma - start);
    if (id.empty()) throw http::ApiError("invalid_query", "runs: an empty run id in '" + text.substr(0, 256) + "'");
    if (!seen.insert(id).second) throw http::ApiError("invalid_query", "runs: " + id + " is given twice");
    ids.push_back(std::move(id));
    if (ids.size() > kMaxFlakinessRuns) break;
    start = comma + 1;
  }
  if (ids.size() < kMinFlakinessRuns || ids.size() > kMaxFlakinessRuns) {
    throw http::ApiError("invalid_query", "runs: give from " + std::to_string(kMinFlakinessRuns) + " to " +
                                              std::to_string(kMaxFlakinessRuns) + " run ids, separated by commas");
  }
  return ids;
}

}  // namespace

void register_run_diff_api(http::Router& router, ApiContext& ctx) {
  // Literal segments win over /v1/runs/{id} in the router, whatever the order of registration.
  router.add("GET", "/v1/runs/diff", [&ctx](const http::Request& request) {
    const json a = finished_run(ctx, request, required_query(request, "a"));
    const json b = finished_run(ctx, request, required_query(request, "b"));
    RunDiffLimits limits;
    limits.allow_removed = query_flag(request, "allow_removed");
    return http::json_response(200, diff_runs(a, b, limits));
  });
  // Up to 100 records are read and parsed one after the other: on a worker, not on the io thread.
  router.add("GET", "/v1/runs/flakiness", [&ctx](const http::Request& request, http::Responder responder) {
    std::vector<std::string> ids = flakiness_ids(request);
    answer_later(ctx.transfers, request.peer.uid, responder,
                 [&ctx, request, ids = std::move(ids)](const http::Responder& answer) {
                   FlakinessTally tally;
                   for (const std::string& id : ids) tally.add(finished_run(ctx, request, id));
                   answer.respond(http::json_response(200, tally.to_json()));
                 });
  });
}

}  // namespace capsule::daemon

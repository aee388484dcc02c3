// What every handler file of the capsuled API shares: request helpers, the visibility rule for runs, and
// register_api, which registers each resource's routes (one handler file per resource).
#include "daemon/api/api.h"

#include <charconv>

#include "daemon/record/test_loss.h"

namespace capsule::daemon {

using nlohmann::json;

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_body(const http::Request& request) {
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw http::ApiError("invalid_json", "the request body is not valid JSON");
  return body;
}

bool wants_ndjson(const http::Request& request) {
  auto it = request.headers.find("accept");
  return it != request.headers.end() && it->second.find("application/x-ndjson") != std::string::npos;
}

bool query_flag(const http::Request& request, const std::string& name) {
  auto it = request.query.find(name);
  return it != request.query.end() && (it->second == "true" || it->second == "1");
}

std::size_t query_limit(const http::Request& request, std::size_t fallback) {
  auto it = request.query.find("limit");
  if (it == request.query.end()) return fallback;
  const std::string& text = it->second;
  std::size_t limit = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), limit);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw http::ApiError("invalid_query", "limit: expected a number, got '" + text + "'");
  }
  return limit;
}

RunRow require_visible_run(ApiContext& ctx, const http::Request& request, const std::string& id) {
  std::optional<RunRow> row = ctx.ledger.get(id);
  if (!row) throw http::ApiError("not_found", "no run with id " + id);
  require_run_visible(caller_of(request.peer), ctx.access, row->peer_uid, id);
  return *row;
}

std::shared_ptr<const nlohmann::json> read_baseline(ApiContext& ctx, const http::Request& request,
                                                    const spec::Baseline& baseline) {
  const std::string& id = baseline.run;
  const std::optional<RunRow> row = ctx.ledger.get(id);
  if (!row || !may_see_run(caller_of(request.peer), ctx.access, row->peer_uid)) {
    std::string message = "baseline.run: no run with id ";
    message += id;
    throw http::ApiError("baseline_not_found", message);
  }
  if (row->state == "queued" || row->state == "running") {
    std::string message = "baseline.run: run ";
    message += id + " is " + row->state + "; wait until it has finished";
    throw http::ApiError("run_active", message);
  }
  return std::make_shared<const nlohmann::json>(tests_view(row->to_json()));
}

void attach_baseline(ApiContext& ctx, const http::Request& request, Submission& run) {
  if (run.spec.baseline) run.baseline_run = read_baseline(ctx, request, *run.spec.baseline);
}

void register_api(http::Router& router, ApiContext& ctx) {
  register_system_api(router, ctx);
  register_runs_api(router, ctx);
  register_run_logs_api(router, ctx);
  register_run_replay_api(router, ctx);
  register_run_files_api(router, ctx);
  register_sessions_api(router, ctx);
  register_stacks_api(router, ctx);
  register_session_files_api(router, ctx);
  register_toolchains_api(router, ctx);
  register_run_diff_api(router, ctx);
  register_snapshots_api(router, ctx);
  register_run_bundle_api(router, ctx);
}

}  // namespace capsule::daemon

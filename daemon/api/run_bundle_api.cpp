// Audit bundles: GET /v1/runs/{id}/bundle streams a finished run's bundle (daemon/bundle/bundle_export.h);
// POST /v1/runs/import {"path"} imports one read as the caller (bundle_import.h). docs/api.md, "Audit bundles".
#include <memory>
#include <string>

#include "base/file_util.h"
#include "daemon/api/api.h"
#include "daemon/api/stream_sink.h"
#include "daemon/bundle/bundle_export.h"
#include "daemon/bundle/bundle_import.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

BundleStores& stores_of(ApiContext& ctx) {
  if (ctx.bundles == nullptr) throw http::ApiError("not_implemented", "this capsuled keeps no image store for bundles");
  return *ctx.bundles;
}

void export_bundle(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  const std::string& id = request.params.at("id");
  const RunRow row = require_visible_run(ctx, request, id);
  if (!row.outcome) throw http::ApiError("run_active", "run " + id + " is " + row.state + "; export it once it has finished");
  BundleStores& stores = stores_of(ctx);
  answer_later(ctx.transfers, request.peer.uid, responder, [&ctx, &stores, row](const http::Responder& answer) {
    const base::ScopedDir staging(stores.make_staging());
    const BundlePlan plan = plan_bundle(row, stores, ctx.snapshots, ctx.logs, staging.path);
    auto writer = answer.start_stream(200, "application/x-tar",
                                      {{"Content-Disposition", "attachment; filename=\"" + row.id + ".bundle.tar\""}});
    BackpressuredSink sink(writer, ctx.transfers);
    try {
      write_bundle(plan, [&sink](std::string_view chunk) { sink.write(chunk); });
      writer->finish();
    } catch (const std::exception&) {
      // Headers are gone already: an unfinished writer aborts the answer (a truncated body, not a clean end).
    }
  });
}

void import_run(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  BundleStores& stores = stores_of(ctx);
  const json body = parse_body(request);
  if (!body.is_object() || body.size() != 1 || !body.contains("path") || !body["path"].is_string()) {
    throw http::ApiError("invalid_request", "an import is {\"path\": \"/abs/bundle.tar\"}");
  }
  const Caller caller = caller_of(request.peer);
  if (!caller.known) throw http::ApiError("forbidden", caller.describe() + " may not import runs");
  auto opened = std::make_shared<OpenedHostPath>(
      open_as_caller(caller, body["path"].get<std::string>(), HostAccess::kReadFile, "path", "invalid_request"));
  if (static_cast<std::uint64_t>(opened->st.st_size) > stores.limits.max_bytes) {
    throw http::ApiError("bundle_too_large", "path: " + opened->path + " is over the bundle ceiling of " +
                                                 std::to_string(stores.limits.max_bytes) + " bytes");
  }
  const pid_t pid = request.peer.pid;
  answer_later(ctx.transfers, request.peer.uid, responder, [&ctx, &stores, opened, caller, pid](const http::Responder& answer) {
    const BundleImport import{opened->fd.get(), opened->path, caller, pid};
    answer.respond(http::json_response(201, import_bundle(import, stores, ctx.snapshots, ctx.ledger, ctx.logs, ctx.limits)));
  });
}

}  // namespace

void register_run_bundle_api(http::Router& router, ApiContext& ctx) {
  router.add("GET", "/v1/runs/{id}/bundle", [&ctx](const http::Request& request, http::Responder responder) {
    export_bundle(ctx, request, responder);
  });
  router.add("POST", "/v1/runs/import", [&ctx](const http::Request& request, http::Responder responder) {
    import_run(ctx, request, responder);
  });
}

}  // namespace capsule::daemon

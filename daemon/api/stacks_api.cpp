// The /v1/stacks resource: create (at once, or ?wait=true until its stages end), list, get, delete. A stack's
// services are sessions of its caller, so `capsule stack exec` and the files routes reach them as sessions.
#include <algorithm>

#include "daemon/api/api.h"
#include "daemon/snapshots/snapshot_workspace.h"
#include "daemon/stacks/stack_manager.h"
#include "spec/stack_spec.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

// How long ?wait=true holds a request for the stages to end.
constexpr auto kStackWaitLimit = std::chrono::minutes(60);

StackManager& stacks_of(ApiContext& ctx) {
  if (ctx.stacks == nullptr) throw http::ApiError("not_implemented", "this capsuled runs no stacks");
  return *ctx.stacks;
}

void require_visible_stack(ApiContext& ctx, const http::Request& request, const std::string& id) {
  const std::optional<uid_t> owner = stacks_of(ctx).owner(id);
  if (!owner || !may_see_run(caller_of(request.peer), ctx.access, *owner)) {
    throw http::ApiError("not_found", "no stack with id " + id);
  }
}

void create_stack(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  StackManager& stacks = stacks_of(ctx);
  const spec::StackSpec spec = spec::parse_stack_spec(parse_body(request), ctx.limits);
  const Caller caller = caller_of(request.peer);
  // capsuled binds published host ports as root: below 1024 only for a caller who could bind them itself.
  for (const auto& [name, service] : spec.services) {
    for (const spec::PublishedPort& published : service.publish) {
      if (published.host_port != 0 && published.host_port < 1024 && !caller.is_root()) {
        throw http::ApiError("forbidden", "services." + name + ".publish: host port " +
                                              std::to_string(published.host_port) + " is privileged (below 1024): root only");
      }
    }
  }
  std::map<std::string, Submission> boxes;
  for (const auto& [name, service] : spec.services) {
    Submission submission;
    submission.spec = service.box.environment;
    try {
      authorize_workspace(submission, caller);
      attach_snapshot_workspace(submission, ctx.snapshots, ctx.access);
    } catch (const http::ApiError& e) {
      throw http::ApiError(e.code(), "services." + name + ": " + e.what());
    }
    boxes.emplace(name, std::move(submission));
  }
  const Peer peer{request.peer.uid, request.peer.pid};
  const json created = stacks.create(spec, std::move(boxes), peer);
  if (!query_flag(request, "wait")) {
    responder.respond(http::json_response(201, created));
    return;
  }
  const std::string id = created["id"].get<std::string>();
  answer_later(ctx.stack_calls, peer.uid, responder, [&stacks, id](const http::Responder& answer) {
    answer.respond(http::json_response(201, stacks.wait_started(id, kStackWaitLimit)));
  });
}

}  // namespace

void register_stacks_api(http::Router& router, ApiContext& ctx) {
  router.add("POST", "/v1/stacks", [&ctx](const http::Request& request, http::Responder responder) {
    create_stack(ctx, request, responder);
  });
  router.add("GET", "/v1/stacks", [&ctx](const http::Request& request) {
    const Caller caller = caller_of(request.peer);
    const std::optional<uid_t> only = sees_all_runs(caller, ctx.access) ? std::nullopt : std::optional(caller.uid);
    const std::size_t limit = std::clamp<std::size_t>(query_limit(request, 100), 1, 1000);
    return http::json_response(200, {{"stacks", stacks_of(ctx).list(only, limit)}});
  });
  router.add("GET", "/v1/stacks/{id}", [&ctx](const http::Request& request) {
    const std::string& id = request.params.at("id");
    require_visible_stack(ctx, request, id);
    return http::json_response(200, stacks_of(ctx).get(id).value_or(json::object()));
  });
  // Waits for the stack's thread to end its boxes: on a worker.
  router.add("DELETE", "/v1/stacks/{id}", [&ctx](const http::Request& request, http::Responder responder) {
    const std::string id = request.params.at("id");
    require_visible_stack(ctx, request, id);
    StackManager& stacks = stacks_of(ctx);
    answer_later(ctx.stack_calls, request.peer.uid, responder, [&stacks, id](const http::Responder& answer) {
      answer.respond(http::json_response(200, stacks.remove(id)));
    });
  });
}

}  // namespace capsule::daemon

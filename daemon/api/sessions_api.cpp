// The /v1/sessions resource: create, list, get, delete, switch its network, and the execs of a session: run one
// (200 run object, ndjson events, or 202 in the background), list, get, stream its output from an offset, signal it.
#include <signal.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "daemon/api/api.h"
#include "daemon/api/event_lines.h"
#include "daemon/snapshots/snapshot_workspace.h"
#include "spec/session_spec.h"

namespace capsule::daemon {

void require_visible_session(ApiContext& ctx, const http::Request& request, const std::string& id) {
  const std::optional<uid_t> owner = ctx.sessions.owner(id);
  if (!owner || !may_see_run(caller_of(request.peer), ctx.access, *owner)) {
    throw http::ApiError("not_found", "no session with id " + id);
  }
}

namespace {

using nlohmann::json;

// The exec `exec_id` of session `id`, visible to the caller; 404 otherwise.
RunRow require_session_exec(ApiContext& ctx, const http::Request& request) {
  const std::string& id = request.params.at("id");
  const std::string& exec_id = request.params.at("exec_id");
  require_visible_session(ctx, request, id);
  std::optional<RunRow> row = ctx.ledger.get(exec_id);
  if (!row || !row->spec.is_object() || row->spec.value("session", "") != id) {
    throw http::ApiError("not_found", "session " + id + " has no exec " + exec_id);
  }
  return *row;
}

// The box is made on the session thread and waited for (up to its start timeout): on a worker, not an io thread.
void create_session(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  const spec::SessionSpec spec = spec::parse_session_spec(parse_body(request), ctx.limits);
  Submission submission;
  submission.spec = spec.environment;
  authorize_workspace(submission, caller_of(request.peer));
  attach_snapshot_workspace(submission, ctx.snapshots, ctx.access);
  const Peer peer{request.peer.uid, request.peer.pid};
  answer_later(ctx.session_calls, peer.uid, responder, [&ctx, spec, submission, peer](const http::Responder& answer) {
    answer.respond(http::json_response(201, ctx.sessions.create(spec, submission, peer)));
  });
}

// A page of the sessions `caller` may see (with live details), read on through the ledger's pages until
// `filter.limit` are found or it has no more. A session whose live state no longer matches filter.state is left
// out. `next` is the last session returned when more follow.
std::pair<json, std::optional<std::string>> visible_sessions(ApiContext& ctx, const Caller& caller,
                                                             SessionFilter filter) {
  const std::size_t wanted = std::clamp<std::size_t>(filter.limit, 1, Ledger::kMaxListLimit);
  filter.limit = wanted + 1;
  if (!sees_all_runs(caller, ctx.access)) filter.peer_uid = caller.uid;  // in SQL: no scan of others' sessions
  json visible = json::array();
  for (;;) {
    SessionPage page = ctx.ledger.list_sessions(filter);
    for (const SessionRow& row : page.sessions) {
      if (!may_see_run(caller, ctx.access, row.peer_uid)) continue;
      std::optional<json> session = ctx.sessions.get(row.id);
      if (!session || (filter.state && (*session)["state"] != *filter.state)) continue;
      if (visible.size() == wanted) return {visible, visible.back()["id"].get<std::string>()};
      visible.push_back(std::move(*session));
    }
    if (!page.next) return {visible, std::nullopt};
    filter.after = page.next;
  }
}

http::Response list_sessions(ApiContext& ctx, const http::Request& request) {
  SessionFilter filter;
  if (auto it = request.query.find("state"); it != request.query.end()) {
    const auto& states = session_states();
    if (std::find(states.begin(), states.end(), it->second) == states.end()) {
      throw http::ApiError("invalid_query", "state: unknown session state '" + it->second + "'");
    }
    filter.state = it->second;
  }
  if (auto it = request.query.find("label"); it != request.query.end()) {
    const auto eq = it->second.find('=');
    if (eq == std::string::npos || eq == 0) throw http::ApiError("invalid_query", "label: expected KEY=VALUE");
    filter.labels[it->second.substr(0, eq)] = it->second.substr(eq + 1);
  }
  filter.limit = query_limit(request, filter.limit);
  if (auto it = request.query.find("after"); it != request.query.end()) filter.after = it->second;
  std::pair<json, std::optional<std::string>> page;
  try {
    page = visible_sessions(ctx, caller_of(request.peer), filter);
  } catch (const LedgerCursorError& e) {
    throw http::ApiError("invalid_query", std::string("after: ") + e.what());
  }
  return http::json_response(200, {{"sessions", page.first}, {"next", page.second ? json(*page.second) : json(nullptr)}});
}

int parse_signal(const json& body) {
  static const std::map<std::string, int> kNames = {{"TERM", SIGTERM}, {"INT", SIGINT},   {"KILL", SIGKILL},
                                                    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
                                                    {"USR2", SIGUSR2}};
  if (!body.is_object() || !body.contains("signal")) throw http::ApiError("invalid_spec", "signal: is required");
  const json& value = body["signal"];
  if (value.is_string()) {
    auto it = kNames.find(value.get<std::string>());
    if (it == kNames.end()) throw http::ApiError("invalid_spec", "signal: unknown signal name " + value.dump());
    return it->second;
  }
  if (value.is_number_integer() && value.get<int>() >= 1 && value.get<int>() <= 64) return value.get<int>();
  throw http::ApiError("invalid_spec", "signal: must be a name (TERM, INT, KILL, HUP, QUIT, USR1, USR2) or 1..64");
}

void run_exec(ApiContext& ctx, const http::Request& request, http::Responder responder) {
  const std::string& id = request.params.at("id");
  require_visible_session(ctx, request, id);
  const spec::ExecSpec spec = spec::parse_exec_spec(parse_body(request));
  const Peer peer{request.peer.uid, request.peer.pid};
  const std::shared_ptr<const json> baseline = spec.baseline ? read_baseline(ctx, request, *spec.baseline) : nullptr;
  if (spec.background) {
    const std::string exec_id = ctx.sessions.exec(id, spec, peer, {}, baseline);
    responder.respond(http::json_response(202, {{"id", exec_id}}));
    return;
  }
  if (wants_ndjson(request)) {
    auto lines = std::make_shared<EventLines>();
    ctx.sessions.exec(id, spec, peer, [lines](const json& event) { lines->add(event); }, baseline);
    lines->start(responder);
    return;
  }
  ctx.sessions.exec(
      id, spec, peer,
      [responder](const json& event) {
        if (event.value("event", "") == "finished") responder.respond(http::json_response(200, event["run"]));
      },
      baseline);
}

http::Response list_execs(ApiContext& ctx, const http::Request& request) {
  const std::string& id = request.params.at("id");
  require_visible_session(ctx, request, id);
  RunFilter filter;
  filter.session = id;
  filter.limit = Ledger::kMaxListLimit;
  json execs = json::array();
  for (const auto& row : ctx.ledger.list(filter).runs) execs.push_back(row.to_json());
  return http::json_response(200, {{"execs", execs}});
}

}  // namespace

void register_sessions_api(http::Router& router, ApiContext& ctx) {
  router.add("POST", "/v1/sessions", [&ctx](const http::Request& request, http::Responder responder) {
    create_session(ctx, request, responder);
  });
  router.add("GET", "/v1/sessions", [&ctx](const http::Request& request) { return list_sessions(ctx, request); });
  router.add("GET", "/v1/sessions/{id}", [&ctx](const http::Request& request) {
    const std::string& id = request.params.at("id");
    require_visible_session(ctx, request, id);
    return http::json_response(200, ctx.sessions.get(id).value_or(json::object()));
  });
  // Waits for the session thread to end the box: on a worker.
  router.add("DELETE", "/v1/sessions/{id}", [&ctx](const http::Request& request, http::Responder responder) {
    const std::string id = request.params.at("id");
    require_visible_session(ctx, request, id);
    const std::string reason = "deleted by " + caller_of(request.peer).describe();
    answer_later(ctx.session_calls, request.peer.uid, responder, [&ctx, id, reason](const http::Responder& answer) {
      answer.respond(http::json_response(200, ctx.sessions.remove(id, reason)));
    });
  });
  router.add("POST", "/v1/sessions/{id}/exec", [&ctx](const http::Request& request, http::Responder responder) {
    run_exec(ctx, request, std::move(responder));
  });
  // Switched on the session thread between execs: quick (a listener stops or starts listening).
  router.add("POST", "/v1/sessions/{id}/network", [&ctx](const http::Request& request) {
    const std::string& id = request.params.at("id");
    require_visible_session(ctx, request, id);
    const bool online = spec::parse_network_switch(parse_body(request));
    return http::json_response(200, ctx.sessions.set_network(id, online));
  });
  router.add("GET", "/v1/sessions/{id}/execs", [&ctx](const http::Request& request) { return list_execs(ctx, request); });
  router.add("GET", "/v1/sessions/{id}/execs/{exec_id}", [&ctx](const http::Request& request) {
    return http::json_response(200, require_session_exec(ctx, request).to_json());
  });
  router.add("GET", "/v1/sessions/{id}/execs/{exec_id}/stream",
             [&ctx](const http::Request& request, http::Responder responder) {
               const RunRow row = require_session_exec(ctx, request);
               http::Request following = request;
               following.query["follow"] = "true";
               serve_log(ctx, row, following, std::move(responder));
             });
  router.add("POST", "/v1/sessions/{id}/execs/{exec_id}/signal", [&ctx](const http::Request& request) {
    const RunRow row = require_session_exec(ctx, request);
    const int signo = parse_signal(parse_body(request));
    ctx.sessions.signal_exec(request.params.at("id"), row.id, signo);
    return http::json_response(202, {{"id", row.id}, {"signal", signo}});
  });
  // The body's bytes as they are (up to the server's body limit), fed to the exec's stdin; ?close=true: EOF.
  router.add("POST", "/v1/sessions/{id}/execs/{exec_id}/stdin", [&ctx](const http::Request& request) {
    const RunRow row = require_session_exec(ctx, request);
    const bool close = query_flag(request, "close");
    ctx.sessions.write_exec_stdin(request.params.at("id"), row.id, request.body, close);
    return http::json_response(202, {{"id", row.id}, {"bytes", request.body.size()}, {"closed", close}});
  });
  router.add("POST", "/v1/sessions/{id}/execs/{exec_id}/resize", [&ctx](const http::Request& request) {
    const RunRow row = require_session_exec(ctx, request);
    const json body = parse_body(request);
    auto size = [&](const char* name) {
      if (!body.is_object() || !body.contains(name) || !body[name].is_number_integer() || body[name].get<std::int64_t>() < 1 ||
          body[name].get<std::int64_t>() > 4096) {
        throw http::ApiError("invalid_spec", std::string(name) + ": must be 1 to 4096");
      }
      return static_cast<std::uint16_t>(body[name].get<std::uint64_t>());
    };
    const std::uint16_t rows = size("rows");
    const std::uint16_t cols = size("cols");
    ctx.sessions.resize_exec(request.params.at("id"), row.id, rows, cols);
    return http::json_response(202, {{"id", row.id}, {"rows", rows}, {"cols", cols}});
  });
}

}  // namespace capsule::daemon

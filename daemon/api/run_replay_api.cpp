// POST /v1/runs/{id}/replay: new runs from a finished run's stored spec and pins, the proxy frozen to the objects
// the original received, labelled capsule.replay_of; "repeat" runs it N times, "vary" changes every other one.
// One replay can be followed as POST /v1/runs is (Accept: application/x-ndjson).
#include <memory>
#include <mutex>
#include <optional>

#include "daemon/api/api.h"
#include "daemon/api/event_lines.h"
#include "daemon/runs/replay_vary.h"
#include "daemon/snapshots/snapshot_workspace.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

constexpr int kMaxRepeat = 50;

struct ReplayRequest {
  int repeat = 1;
  ReplayVary vary;
  bool wait = false;
  std::optional<spec::Workspace> workspace;  // the replaying caller's own, instead of the original's
};

ReplayRequest parse_replay_request(const http::Request& request) {
  ReplayRequest out;
  out.wait = query_flag(request, "wait");
  if (request.body.empty()) return out;
  const json body = parse_body(request);
  if (!body.is_object()) throw http::ApiError("invalid_request", "the body must be an object {repeat, vary, wait}");
  for (const auto& [key, value] : body.items()) {
    if (key == "repeat") {
      if (!value.is_number_integer() || value.get<int>() < 1 || value.get<int>() > kMaxRepeat) {
        throw http::ApiError("invalid_request", "repeat: must be a whole number from 1 to " + std::to_string(kMaxRepeat));
      }
      out.repeat = value.get<int>();
    } else if (key == "vary") {
      out.vary = parse_replay_vary(value);
    } else if (key == "workspace") {
      out.workspace = spec::parse_workspace(value);
    } else if (key == "wait") {
      if (!value.is_boolean()) throw http::ApiError("invalid_request", "wait: must be true or false");
      out.wait = out.wait || value.get<bool>();
    } else {
      throw http::ApiError("invalid_request", key + ": unknown; expected repeat, vary, wait or workspace");
    }
  }
  return out;
}

// The original's {spec, pinned} as a submission, its proxy frozen to what the original was served.
Submission replay_submission(ApiContext& ctx, const RunRow& original) {
  const json stored = original.to_json();
  if (stored["spec"].is_object() && stored["spec"].contains("session")) {
    throw http::ApiError("invalid_request", "run " + original.id + " is an exec of session " +
                                                stored["spec"].value("session", "") + "; only runs are replayed");
  }
  Submission run = parse_submission({{"spec", stored["spec"]}, {"pinned", stored["pinned"]}}, ctx.limits);
  if (run.spec.network == "proxy") {
    if (stored["proxy"].is_null() && stored.contains("record_error")) {  // run_record.cpp's last-resort summary
      throw http::ApiError("record_incomplete", "run " + original.id + " cannot be replayed: its record lost the "
                                                "objects its proxy served (" + stored["record_error"].get<std::string>() + ")");
    }
    run.frozen = std::make_shared<const proxy::FrozenSet>(
        proxy::FrozenSet::from_dependencies(original.id, stored["pinned"]["dependencies"]));
  }
  run.spec.labels.erase(spec::kReplayVaryLabel);
  run.spec.labels[spec::kReplayOfLabel] = original.id;
  return run;
}

// The workspace a replay mounts. A caller-named one replaces the original's (its pin no longer applies). A run
// imported from a bundle is input from another machine: its spec's host path is never opened here, so it
// replays from its own snapshot (pinned.workspace_digest) or from what the caller names, and is refused else.
void choose_replay_workspace(Submission& run, const RunRow& original, const ReplayRequest& asked) {
  if (asked.workspace) {
    run.spec.workspace = asked.workspace;
    run.pinned.workspace_digest.reset();
    return;
  }
  const bool imported = original.outcome && original.outcome->contains("imported");
  if (!imported || !run.spec.workspace || !run.spec.workspace->snapshot.empty()) return;
  if (run.pinned.workspace_digest) {
    run.spec.workspace = spec::Workspace{"", *run.pinned.workspace_digest, spec::WorkspaceMode::kCow};
    run.spec.reproducible = false;
    return;
  }
  throw http::ApiError("invalid_request", "run " + original.id + " was imported from another machine, where its "
                                          "workspace was the host path '" + run.spec.workspace->path +
                                          "', and its bundle holds no snapshot of it: name the workspace to replay "
                                          "it with ({\"workspace\": {\"path\": ...} or {\"snapshot\": ...}})");
}

// Answers once every replay has finished, in the order submitted; nothing if the submission failed part way.
struct Waiting {
  explicit Waiting(http::Responder r, std::size_t count) : responder(std::move(r)), runs(count), remaining(count) {}
  std::mutex mutex;
  http::Responder responder;
  std::vector<json> runs;
  std::size_t remaining;
  bool abandoned = false;

  void finished(std::size_t index, const json& run) {
    std::lock_guard lock(mutex);
    runs[index] = run;
    if (--remaining == 0 && !abandoned) responder.respond(http::json_response(200, {{"runs", runs}}));
  }
};

void replay_run(ApiContext& ctx, const http::Request& request, http::Responder responder) {
  const std::string& id = request.params.at("id");
  const RunRow original = require_visible_run(ctx, request, id);
  const ReplayRequest asked = parse_replay_request(request);
  if (!original.outcome) throw http::ApiError("run_active", "run " + id + " has not finished; replay it once it has");
  Submission base = replay_submission(ctx, original);
  attach_baseline(ctx, request, base);  // a replay is compared with the original's baseline too
  choose_replay_workspace(base, original, asked);
  const std::uint64_t peak = original.outcome->contains("result")
                                 ? (*original.outcome)["result"].value("peak_memory_bytes", std::uint64_t{0})
                                 : 0;
  const Caller caller = caller_of(request.peer);
  const Peer peer{request.peer.uid, request.peer.pid};
  // Once for every repeat (they share the opened directory and the snapshot's lease): as the caller asking,
  // whoever ran the original.
  authorize_workspace(base, caller);
  attach_snapshot_workspace(base, ctx.snapshots, ctx.access);  // a snapshot workspace's lease (snapshot_workspace.h)
  std::vector<Submission> replays;
  for (int i = 0; i < asked.repeat; ++i) {
    Submission run = base;
    // The 1st, 3rd, 5th... replay is varied; the 2nd, 4th... run as the original did.
    if (asked.vary.any() && i % 2 == 0) {
      std::string names;
      for (const auto& name : apply_replay_vary(run.spec, asked.vary, peak)) names += (names.empty() ? "" : ",") + name;
      if (!names.empty()) run.spec.labels[spec::kReplayVaryLabel] = names;
    }
    replays.push_back(std::move(run));
  }
  if (wants_ndjson(request)) {
    if (replays.size() != 1) throw http::ApiError("invalid_request", "repeat: an event stream follows one replay only");
    auto lines = std::make_shared<EventLines>();
    ctx.runs.submit(replays.front(), peer, [lines](const json& event) { lines->add(event); });
    lines->start(responder);
    return;
  }
  std::shared_ptr<Waiting> waiting;
  if (asked.wait) waiting = std::make_shared<Waiting>(responder, replays.size());
  json ids = json::array();
  try {
    for (std::size_t i = 0; i < replays.size(); ++i) {
      RunManager::Listener listener;
      if (waiting) {
        listener = [waiting, i](const json& event) {
          if (event.value("event", "") == "finished") waiting->finished(i, event["run"]);
        };
      }
      ids.push_back(ctx.runs.submit(replays[i], peer, std::move(listener)));
    }
  } catch (...) {
    if (waiting) {
      std::lock_guard lock(waiting->mutex);
      waiting->abandoned = true;  // the error below is the answer; replays already queued run on
    }
    throw;
  }
  if (!waiting) responder.respond(http::json_response(202, {{"runs", ids}}));
}

}  // namespace

void register_run_replay_api(http::Router& router, ApiContext& ctx) {
  router.add("POST", "/v1/runs/{id}/replay", [&ctx](const http::Request& request, http::Responder responder) {
    replay_run(ctx, request, std::move(responder));
  });
}

}  // namespace capsule::daemon

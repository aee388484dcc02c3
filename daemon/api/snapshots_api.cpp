// The /v1/snapshots resource: create from a host directory, tar or git repository (as the caller, on a worker),
// list, show (?info=true) or export the canonical tar, remove, and collect unused ones. docs/api.md, "Snapshots".
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/file_util.h"
#include "base/units.h"
#include "daemon/api/api.h"
#include "daemon/snapshots/directory_snapshot.h"
#include "daemon/snapshots/snapshot_sources.h"
#include "daemon/snapshots/snapshot_store.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::size_t kExportChunk = 1 << 20;

SnapshotStore& store_of(ApiContext& ctx) {
  if (ctx.snapshots == nullptr) throw http::ApiError("not_implemented", "this capsuled has no snapshot store");
  return *ctx.snapshots;
}

bool may_see(const Caller& caller, const AccessPolicy& access, const SnapshotInfo& info) {
  return sees_all_runs(caller, access) ||
         (caller.known && std::find(info.owners.begin(), info.owners.end(), caller.uid) != info.owners.end());
}

// The snapshot `digest` if the caller may see it; otherwise the answer an unknown digest gets.
SnapshotInfo require_visible_snapshot(ApiContext& ctx, const http::Request& request) {
  const std::string digest = checked_snapshot_digest(request.params.at("digest"), "digest");
  std::optional<SnapshotInfo> info = store_of(ctx).find(digest);
  if (!info || !may_see(caller_of(request.peer), ctx.access, *info)) {
    throw http::ApiError("snapshot_not_found", "no snapshot " + digest);
  }
  return *info;
}

// POST /v1/snapshots: the source is read as the caller on a worker; 201 with the snapshot and whether an unchanged
// directory's was found again ("reused").
void create_snapshot(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  SnapshotStore& store = store_of(ctx);
  const SnapshotSourceRequest source = parse_snapshot_source(parse_body(request));
  const Caller caller = caller_of(request.peer);
  if (!caller.known) throw http::ApiError("forbidden", caller.describe() + " may not create snapshots");
  answer_later(ctx.snapshot_calls, caller.uid, responder, [&store, source, caller](const http::Responder& answer) {
    if (source.kind == SnapshotSourceRequest::Kind::kDir) {  // found again when its tree is unchanged
      const OpenedHostPath dir = open_as_caller(caller, source.path, HostAccess::kReadDir, "dir", "invalid_request");
      const DirectorySnapshot made = snapshot_directory(store, caller, dir, {{"dir", source.path}});
      json body = made.info.to_json();
      body["reused"] = made.reused;
      return answer.respond(http::json_response(201, body));
    }
    store.require_room();
    const base::ScopedDir scoped(store.make_staging());
    const fs::path& staging = scoped.path;
    const PreparedSource prepared = prepare_snapshot_source(source, caller, staging, store.limits());
    json body = store.create(prepared.tar, prepared.description, caller.uid, prepared.mtime).to_json();
    body["reused"] = false;
    answer.respond(http::json_response(201, body));
  });
}

// Sends the file chunk by chunk, each once the previous one has gone out.
void send_chunks(const std::shared_ptr<http::StreamWriter>& writer, const std::shared_ptr<base::UniqueFd>& fd) {
  std::string chunk(kExportChunk, '\0');
  ssize_t got;
  do {
    got = read(fd->get(), chunk.data(), chunk.size());
  } while (got < 0 && errno == EINTR);
  if (got <= 0) {
    if (got == 0) writer->finish();
    return;  // a read error: dropped unfinished, the client sees a truncated body
  }
  chunk.resize(static_cast<std::size_t>(got));
  if (!writer->write(std::move(chunk))) return;
  writer->when_drained([writer, fd] { send_chunks(writer, fd); });
}

// GET /v1/snapshots/{digest}: the canonical tar, streamed; ?info=true: the snapshot object.
void get_snapshot(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  const SnapshotInfo info = require_visible_snapshot(ctx, request);
  if (query_flag(request, "info")) return responder.respond(http::json_response(200, info.to_json()));
  auto fd = std::make_shared<base::UniqueFd>(open(store_of(ctx).tar_path(info.digest).c_str(), O_RDONLY | O_CLOEXEC));
  if (!*fd) throw http::ApiError("internal_error", "snapshot " + info.digest + ": " + std::strerror(errno));
  auto writer = responder.start_stream(200, "application/x-tar",
                                       {{"X-Capsule-Size", std::to_string(info.size)}, {"X-Capsule-Digest", info.digest}});
  send_chunks(writer, fd);
}

// Reads every snapshot's metadata: on a transfer worker, not the io thread.
void list_snapshots(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  const Caller caller = caller_of(request.peer);
  answer_later(ctx.transfers, caller.uid, responder, [&ctx, caller](const http::Responder& answer) {
    json list = json::array();
    for (const SnapshotInfo& info : store_of(ctx).list()) {
      if (may_see(caller, ctx.access, info)) list.push_back(info.to_json());
    }
    answer.respond(http::json_response(200, {{"snapshots", list}}));
  });
}

// DELETE: root and the admin group remove the snapshot; an owner removes its own claim, and the snapshot goes
// with the last one. Its tree may be many files on a slow disk: removed on a transfer worker.
void delete_snapshot(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  const SnapshotInfo info = require_visible_snapshot(ctx, request);
  const Caller caller = caller_of(request.peer);
  const bool everyone = sees_all_runs(caller, ctx.access);
  answer_later(ctx.transfers, caller.uid, responder, [&ctx, info, caller, everyone](const http::Responder& answer) {
    store_of(ctx).remove(info.digest, everyone ? std::nullopt : std::optional<uid_t>(caller.uid));
    answer.respond(http::json_response(200, {{"removed", info.digest}}));
  });
}

// POST /v1/snapshots/gc {"unused_for": duration (default "0s"), "dry_run": bool}: removes the snapshots no kept
// record pins and no live run or session holds, unused for at least that long. Root and the admin group collect
// every such snapshot; another caller drops only its own claims (a snapshot goes with its last). On a worker.
void collect_snapshots(ApiContext& ctx, const http::Request& request, const http::Responder& responder) {
  SnapshotStore& store = store_of(ctx);
  const json body = request.body.empty() ? json::object() : parse_body(request);
  if (!body.is_object()) throw http::ApiError("invalid_request", "body: must be a JSON object");
  std::chrono::milliseconds unused_for{0};
  bool dry_run = false;
  for (const auto& [key, value] : body.items()) {
    if (key == "unused_for") {
      if (!value.is_string()) throw http::ApiError("invalid_request", "unused_for: must be a duration such as \"24h\"");
      try {
        unused_for = base::parse_duration(value.get<std::string>());
      } catch (const std::exception& e) {  // invalid_argument, or out_of_range for a number past any duration
        throw http::ApiError("invalid_request", std::string("unused_for: ") + e.what());
      }
    } else if (key == "dry_run") {
      if (!value.is_boolean()) throw http::ApiError("invalid_request", "dry_run: must be true or false");
      dry_run = value.get<bool>();
    } else {
      throw http::ApiError("invalid_request", key + ": unknown field");
    }
  }
  const Caller caller = caller_of(request.peer);
  if (!caller.known) throw http::ApiError("forbidden", caller.describe() + " may not collect snapshots");
  SnapshotGc gc;
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch());
  gc.unused_before_us = (now - unused_for).count();
  gc.owner = sees_all_runs(caller, ctx.access) ? std::nullopt : std::optional<uid_t>(caller.uid);
  gc.dry_run = dry_run;
  answer_later(ctx.transfers, caller.uid, responder, [&ctx, &store, gc](const http::Responder& answer) {
    json report = store.collect_garbage([&ctx] { return ctx.ledger.pinned_workspace_digests(); }, gc).to_json();
    report["dry_run"] = gc.dry_run;
    answer.respond(http::json_response(200, report));
  });
}

}  // namespace

void register_snapshots_api(http::Router& router, ApiContext& ctx) {
  router.add("POST", "/v1/snapshots", [&ctx](const http::Request& request, http::Responder responder) {
    create_snapshot(ctx, request, responder);
  });
  router.add("GET", "/v1/snapshots", [&ctx](const http::Request& request, http::Responder responder) {
    list_snapshots(ctx, request, responder);
  });
  router.add("POST", "/v1/snapshots/gc", [&ctx](const http::Request& request, http::Responder responder) {
    collect_snapshots(ctx, request, responder);
  });
  router.add("GET", "/v1/snapshots/{digest}", [&ctx](const http::Request& request, http::Responder responder) {
    get_snapshot(ctx, request, responder);
  });
  router.add("DELETE", "/v1/snapshots/{digest}", [&ctx](const http::Request& request, http::Responder responder) {
    delete_snapshot(ctx, request, responder);
  });
}

}  // namespace capsule::daemon

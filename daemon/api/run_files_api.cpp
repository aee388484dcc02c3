// A finished run's kept outputs (daemon/runs/run_outputs.h): files and directories read out of its layer tars,
// streamed from a transfer worker, and commits of its (or a live session's) root layer into an image. docs/api.md.
#include <memory>
#include <string>
#include <vector>

#include "daemon/api/api.h"
#include "daemon/api/images_api.h"
#include "daemon/api/stream_sink.h"
#include "daemon/image_access.h"
#include "daemon/runs/layer_files.h"
#include "http/response.h"
#include "images/toolchain_select.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

// ?path=P: relative P is under /workspace (the workspace layer), absolute P in the root filesystem (its layer).
struct OutputPath {
  std::string layer;     // "workspace" or "root"
  std::string relative;  // inside that layer: "a/b", "" for its top
  std::string shown;     // as the caller wrote it
};

OutputPath output_path(const http::Request& request) {
  auto it = request.query.find("path");
  if (it == request.query.end() || it->second.empty()) {
    throw http::ApiError("invalid_query", "path: names a file or directory the run wrote (relative: under "
                                          "/workspace; absolute: in its root filesystem)");
  }
  const std::string& text = it->second;
  if (text.find('\0') != std::string::npos) throw http::ApiError("invalid_query", "path: must not contain NUL");
  OutputPath out{text.front() == '/' ? "root" : "workspace", "", text};
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t slash = std::min(text.find('/', start), text.size());
    const std::string part = text.substr(start, slash - start);
    if (part == "..") throw http::ApiError("invalid_query", "path: '" + text + "' must not contain '..'");
    if (!part.empty() && part != ".") out.relative += (out.relative.empty() ? "" : "/") + part;
    start = slash + 1;
  }
  return out;
}

void require_finished(const RunRow& row) {
  if (row.state == "queued" || row.state == "running") {
    throw http::ApiError("run_active", "run " + row.id + " is " + row.state + "; its outputs are kept once it ends");
  }
}

RunOutputs& outputs_of(ApiContext& ctx) {
  if (ctx.runs.outputs() == nullptr) throw http::ApiError("outputs_not_kept", "this capsuled keeps no run outputs");
  return *ctx.runs.outputs();
}

void get_files(ApiContext& ctx, const http::Request& request, http::Responder responder) {
  const std::string& id = request.params.at("id");
  const RunRow row = require_visible_run(ctx, request, id);
  const OutputPath path = output_path(request);
  require_finished(row);
  const KeptLayer layer = outputs_of(ctx).layer(id, path.layer);
  answer_later(ctx.transfers, request.peer.uid, responder, [&ctx, id, path, layer](const http::Responder& answer) {
    const auto entry = find_in_layer(layer.path, path.relative);
    if (!entry) {
      throw http::ApiError("not_found", "path: '" + path.shown + "' is not in the outputs of run " + id +
                                            " (they hold what the run wrote to its " + path.layer + ")");
    }
    const bool file = entry->kind == LayerEntryKind::kFile;
    std::vector<std::pair<std::string, std::string>> headers;
    if (file) headers.emplace_back("X-Capsule-Size", std::to_string(entry->size));
    auto writer = answer.start_stream(200, file ? "application/octet-stream" : "application/x-tar", headers);
    BackpressuredSink sink(writer, ctx.transfers);
    try {
      write_from_layer(layer.path, path.relative, *entry, [&](std::string_view chunk) { sink.write(chunk); });
      writer->finish();
    } catch (const std::exception&) {
      // Headers are gone already: an unfinished writer aborts the answer (a truncated body, not a clean end).
    }
  });
}

// The image digests a run or session pinned (base first); none for the host image.
std::vector<std::string> pinned_images(const json& pinned) {
  std::vector<std::string> bases;
  if (pinned.is_object() && pinned.contains("image_digests") && pinned["image_digests"].is_array()) {
    for (const auto& digest : pinned["image_digests"]) bases.push_back(digest.get<std::string>());
  }
  return bases;
}

// {"ref": "name:tag"[, "public": bool][, "group": name]}: the image is the committer's, private unless shared.
struct CommitRequest {
  std::string ref;
  images::RefWrite write;
};

CommitRequest commit_request(const ApiContext& ctx, const http::Request& request) {
  const json body = parse_body(request);
  if (!body.is_object() || !body.contains("ref") || !body["ref"].is_string()) {
    throw http::ApiError("invalid_request", "a commit is {\"ref\": \"name:tag\"[, \"public\": bool][, \"group\": name]}");
  }
  json sharing = json::object();
  for (const auto& [key, value] : body.items()) {
    if (key == "public" || key == "group") sharing[key] = value;
    else if (key != "ref") throw http::ApiError("invalid_request", key + ": unknown field");
  }
  return {body["ref"].get<std::string>(), ref_write(caller_of(request.peer), ctx.access, RefOrigin::kCommit, sharing)};
}

// A commit's store failure as an answer: a ref the store refuses is the caller's, anything else capsule's.
[[noreturn]] void answer_commit_failure(const base::Error& e, const std::string& what) {
  const std::string& step = e.cause().step;
  std::string code = "internal_error";
  if (step == "ref") code = "invalid_ref";
  if (step == "ref_owner") code = "forbidden";
  throw http::ApiError(code, "committing " + what + ": " + e.what());
}

void commit(ApiContext& ctx, const http::Request& request, http::Responder responder) {
  const std::string& id = request.params.at("id");
  const RunRow row = require_visible_run(ctx, request, id);
  const CommitRequest wanted = commit_request(ctx, request);
  require_finished(row);
  const std::vector<std::string> bases = pinned_images(row.pinned);
  if (bases.empty()) {
    throw http::ApiError("not_committable", "run " + id + " ran on the built-in host image, which cannot take a layer: "
                                            "run on an imported image (POST /v1/images) to commit what it installs; "
                                            "GET /v1/runs/" + id + "/files fetches its outputs meanwhile");
  }
  if (ctx.images.store == nullptr) throw http::ApiError("not_committable", "this capsuled has no image store");
  RunOutputs& outputs = outputs_of(ctx);
  const images::RefViewer viewer = ref_viewer(caller_of(request.peer), ctx.access);
  answer_later(ctx.transfers, request.peer.uid, responder, [&ctx, &outputs, id, bases, wanted, viewer](const http::Responder& answer) {
    store::Digest digest;
    try {
      digest = outputs.commit(id, bases, wanted.ref, wanted.write);
    } catch (const http::ApiError&) {
      throw;
    } catch (const base::Error& e) {
      answer_commit_failure(e, "run " + id);
    }
    answer.respond(http::json_response(201, image_to_json(ctx.images.store->inspect(digest.str(), viewer))));
  });
}

// A session's live root filesystem changes on its pinned images; the box is frozen while they are packed.
void commit_session(ApiContext& ctx, const http::Request& request, http::Responder responder) {
  const std::string& id = request.params.at("id");
  require_visible_session(ctx, request, id);
  const CommitRequest wanted = commit_request(ctx, request);
  const auto row = ctx.ledger.get_session(id);
  const std::vector<std::string> bases = row ? pinned_images(row->pinned) : std::vector<std::string>{};
  if (bases.empty()) {
    throw http::ApiError("not_committable", "session " + id + " runs on the built-in host image, which cannot take a "
                                            "layer: create it on an imported image (POST /v1/images) to commit it");
  }
  if (ctx.images.store == nullptr) throw http::ApiError("not_committable", "this capsuled has no image store");
  RunOutputs& outputs = outputs_of(ctx);
  const images::RefViewer viewer = ref_viewer(caller_of(request.peer), ctx.access);
  answer_later(ctx.session_calls, request.peer.uid, responder, [&ctx, &outputs, id, bases, wanted, viewer](const http::Responder& answer) {
    store::Digest digest;
    try {
      ctx.sessions.with_frozen_box(id, [&](const SessionBox& box) {
        RunUppers uppers;
        uppers.root = box.sandbox.rootfs_upper();
        uppers.id_base = box.sandbox.host_id_base();
        digest = outputs.commit_upper(uppers, bases, wanted.ref, {{std::string(images::kCommittedFromSessionLabel), id}},
                                      wanted.write);
      });
    } catch (const http::ApiError&) {
      throw;
    } catch (const base::Error& e) {
      answer_commit_failure(e, "session " + id);
    }
    answer.respond(http::json_response(201, image_to_json(ctx.images.store->inspect(digest.str(), viewer))));
  });
}

}  // namespace

void register_run_files_api(http::Router& router, ApiContext& ctx) {
  router.add("GET", "/v1/runs/{id}/files",
             [&ctx](const http::Request& request, http::Responder responder) { get_files(ctx, request, responder); });
  router.add("POST", "/v1/runs/{id}/commit",
             [&ctx](const http::Request& request, http::Responder responder) { commit(ctx, request, responder); });
  router.add("POST", "/v1/sessions/{id}/commit",
             [&ctx](const http::Request& request, http::Responder responder) { commit_session(ctx, request, responder); });
}

}  // namespace capsule::daemon

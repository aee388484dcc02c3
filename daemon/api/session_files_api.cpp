// The routes over a live session's filesystem: files in and out (resolved only inside the box, openat2
// RESOLVE_IN_ROOT on its root), the workspace diff, checkpoints and reset. docs/api.md, "Sessions".
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <thread>

#include "daemon/api/api.h"
#include "daemon/api/stream_sink.h"
#include "daemon/record/diff_patches.h"
#include "daemon/record/workspace_diff.h"
#include "daemon/sessions/session_checkpoints.h"
#include "daemon/sessions/session_diff_filter.h"
#include "http/response.h"
#include "sandbox/root_files.h"
#include "sandbox/tar_in_root.h"

namespace capsule::daemon {
namespace {

constexpr std::size_t kChunkBytes = 64 * 1024;
constexpr std::uint64_t kDefaultFileLimit = 8ull << 30;  // bytes in one upload without a disk limit

// What a file route needs of the box, taken on the session thread; the I/O happens on the transfer's worker.
struct BoxFiles {
  base::UniqueFd root;
  sandbox::RootOwner owner;
  sandbox::IdRange ids;  // the box's ids on the host: what a tar out of it names owners by (sandbox root 0:0)
  std::uint64_t limit_bytes = kDefaultFileLimit;
};

BoxFiles box_files(ApiContext& ctx, const std::string& id) {
  BoxFiles files;
  ctx.sessions.with_box(id, [&](const SessionBox& box) {
    files.root = box.sandbox.open_root();
    // Files put into the box belong to its root user: sandbox id 0 is host id host_id_base().
    files.owner = sandbox::RootOwner{box.sandbox.host_id_base(), box.sandbox.host_id_base()};
    files.ids = sandbox::IdRange{box.sandbox.host_id_base(), box.sandbox.host_id_count()};
    const std::uint64_t disk = box.sandbox.environment().limits.disk_bytes;
    if (disk != 0) files.limit_bytes = disk;
  });
  return files;
}

std::string required_path(const http::Request& request) {
  auto it = request.query.find("path");
  if (it == request.query.end() || it->second.empty()) {
    throw http::ApiError("invalid_request", "the query parameter 'path' names the file or directory in the session");
  }
  return it->second;
}

unsigned file_mode(const http::Request& request) {
  auto it = request.query.find("mode");
  if (it == request.query.end()) return 0644;
  const std::string& text = it->second;
  if (text.empty() || text.size() > 4 || text.find_first_not_of("01234567") != std::string::npos) {
    throw http::ApiError("invalid_request", "mode: '" + text + "' is not an octal mode like 0644");
  }
  return static_cast<unsigned>(std::stoul(text, nullptr, 8)) & 0777;
}

// Reads a descriptor in chunks (a host file or a socket) as a ByteReader, until the daemon stops.
sandbox::ByteReader fd_reader(int fd, std::string& buffer, const BlockingCalls& transfers) {
  buffer.resize(kChunkBytes);
  return [fd, &buffer, &transfers]() -> std::string_view {
    check_not_stopping(transfers);
    for (;;) {
      const ssize_t got = read(fd, buffer.data(), buffer.size());
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) base::throw_errno("files", "", "read");
      return {buffer.data(), static_cast<std::size_t>(got)};
    }
  };
}

sandbox::ByteReader body_reader(const std::string& body, const BlockingCalls& transfers) {
  auto offset = std::make_shared<std::size_t>(0);
  return [&body, offset, &transfers]() -> std::string_view {
    check_not_stopping(transfers);
    const std::size_t start = *offset;
    const std::size_t size = std::min(kChunkBytes, body.size() - start);
    *offset += size;
    return {body.data() + start, size};
  };
}

nlohmann::json counts_json(const std::string& path, const sandbox::TreeCounts& counts) {
  return {{"path", path}, {"files", counts.files}, {"dirs", counts.dirs}, {"symlinks", counts.symlinks},
          {"bytes", counts.bytes}};
}

// A host directory packed by one thread into a socket pair and unpacked from it by this one: a tree of any size
// crosses with two 64 KiB buffers. The packer reads as the caller (its ids and groups, no capabilities), so a
// directory it may open but holding files it may not read (another user's in /tmp) gives it nothing more.
sandbox::TreeCounts copy_host_tree(int host_dir, const Caller& caller, const BoxFiles& box, const std::string& dest,
                                   const BlockingCalls& transfers) {
  // A socket pair, not a pipe: once the unpacker gives up, the packer's next send fails with EPIPE instead of
  // raising SIGPIPE in the daemon (MSG_NOSIGNAL).
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) base::throw_errno("files", "", "socketpair");
  base::UniqueFd read_end(fds[0]);
  base::UniqueFd write_end(fds[1]);
  std::exception_ptr pack_error;
  std::thread packer([&] {
    try {
      std::optional<sandbox::ActingAs> as_caller;
      if (!caller.is_root()) as_caller.emplace(sandbox::RootOwner{caller.uid, caller.gid}, caller.groups, false);
      sandbox::pack_tree(host_dir, ".", [&](std::string_view chunk) {
        while (!chunk.empty()) {
          const ssize_t put = send(write_end.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
          if (put < 0 && errno == EINTR) continue;
          if (put < 0) base::throw_errno("files", "", "write to the unpacker");
          chunk.remove_prefix(static_cast<std::size_t>(put));
        }
      });
    } catch (...) {
      pack_error = std::current_exception();
    }
    write_end.reset();
  });
  std::string buffer;
  sandbox::TreeCounts counts;
  try {
    const sandbox::ActingAs acting(box.owner, {}, true);  // after the packer started: it must not inherit this
    counts = sandbox::unpack_tree(box.root.get(), dest, fd_reader(read_end.get(), buffer, transfers), box.owner,
                                  sandbox::UnpackLimits{box.limit_bytes});
  } catch (...) {
    read_end.reset();  // the packer's next write fails and it stops
    packer.join();
    throw;
  }
  read_end.reset();
  packer.join();
  if (pack_error) std::rethrow_exception(pack_error);
  return counts;
}

// PUT: the body's bytes (a file), a tar (unpacked at the path), or {"source": host path} opened as the caller
// (a file or a whole directory, streamed: nothing of it is held in memory). The counts of what was written.
nlohmann::json put_files(ApiContext& ctx, const http::Request& request, const std::string& id) {
  const std::string path = required_path(request);
  sandbox::normalize_sandbox_path(path);
  const std::string type = request.headers.count("Content-Type") ? request.headers.at("Content-Type") : "";
  if (type.starts_with("application/json")) {
    const nlohmann::json body = parse_body(request);
    if (!body.is_object() || !body.contains("source") || !body["source"].is_string()) {
      throw http::ApiError("invalid_request", "a JSON body is {\"source\": \"/host/path\"}");
    }
    const std::string source = body["source"].get<std::string>();
    const Caller caller = caller_of(request.peer);
    std::optional<OpenedHostPath> opened;
    try {
      opened.emplace(open_as_caller(caller, source, HostAccess::kReadFile, "source", "invalid_request"));
    } catch (const http::ApiError& e) {
      if (e.code() != "invalid_request") throw;
      opened.emplace(open_as_caller(caller, source, HostAccess::kReadDir, "source", "invalid_request"));
    }
    const BoxFiles box = box_files(ctx, id);
    if (S_ISDIR(opened->st.st_mode)) {
      const sandbox::TreeCounts counts = copy_host_tree(opened->fd.get(), caller, box, path, ctx.transfers);
      sandbox::sync_filesystem(box.root.get());  // its dirs and inodes too: 507, not 200, when they cannot be stored
      return counts_json(path, counts);
    }
    const sandbox::ActingAs acting(box.owner, {}, true);
    std::string buffer;
    const std::uint64_t bytes =
        sandbox::write_file(box.root.get(), path, fd_reader(opened->fd.get(), buffer, ctx.transfers),
                            opened->st.st_mode & 0777, box.owner, box.limit_bytes);
    return counts_json(path, sandbox::TreeCounts{1, 0, 0, bytes, 0});
  }
  const unsigned mode = file_mode(request);
  const BoxFiles box = box_files(ctx, id);
  const sandbox::ActingAs acting(box.owner, {}, true);
  if (type.starts_with("application/x-tar")) {
    const sandbox::TreeCounts counts = sandbox::unpack_tree(box.root.get(), path, body_reader(request.body, ctx.transfers),
                                                            box.owner, sandbox::UnpackLimits{box.limit_bytes});
    sandbox::sync_filesystem(box.root.get());
    return counts_json(path, counts);
  }
  const std::uint64_t bytes = sandbox::write_file(box.root.get(), path, body_reader(request.body, ctx.transfers), mode,
                                                  box.owner, box.limit_bytes);
  return counts_json(path, sandbox::TreeCounts{1, 0, 0, bytes, 0});
}

// GET: a file's bytes, or a tar of a directory, streamed from a transfer worker.
void get_files(ApiContext& ctx, const http::Request& request, const std::string& id, const http::Responder& responder) {
  const std::string path = required_path(request);
  const BoxFiles box = box_files(ctx, id);
  // Read as the box's root user without capabilities, as its execs run: the daemon gives only what the box
  // itself could read, never a host file bound in that the caller may not read.
  const sandbox::ActingAs acting(box.owner, {}, false);
  const sandbox::OpenedFile opened = sandbox::open_for_read(box.root.get(), path);
  const bool is_dir = S_ISDIR(opened.st.st_mode);
  std::vector<std::pair<std::string, std::string>> headers;
  if (!is_dir) headers.emplace_back("X-Capsule-Size", std::to_string(opened.st.st_size));
  auto writer = responder.start_stream(200, is_dir ? "application/x-tar" : "application/octet-stream", headers);
  BackpressuredSink sink(writer, ctx.transfers);
  try {
    if (is_dir) {
      // Owners as the box sees them and no setuid/setgid bit, as a run's kept outputs serve them (docs/api.md).
      sandbox::pack_tree(box.root.get(), path, [&](std::string_view chunk) { sink.write(chunk); }, {}, box.ids);
    } else {
      std::string buffer;
      const sandbox::ByteReader reader = fd_reader(opened.fd.get(), buffer, ctx.transfers);
      for (std::string_view chunk = reader(); !chunk.empty(); chunk = reader()) sink.write(chunk);
    }
    writer->finish();
  } catch (const std::exception&) {
    // Headers are gone already: dropping the writer unfinished aborts the answer, so the client sees a
    // truncated body rather than a clean end.
  }
}

// Both roots are opened on the session thread, while the box (and a non-root caller's workspace descriptor) is
// sure to be there; the walk reads them after, on the transfer's worker. Path filters leave entries out
// (session_diff_filter.h) before any patch is made.
void diff(ApiContext& ctx, const http::Request& request, const std::string& id, const http::Responder& responder) {
  const DiffFilter filter = parse_diff_filter(request.target);  // ?include=GLOB&exclude=GLOB, each repeatable
  base::UniqueFd upper, lower;
  ctx.sessions.with_box(id, [&](const SessionBox& box) {
    if (box.workspace_upper.empty() || box.workspace_layers.empty()) return;
    upper = open_diff_root(box.workspace_upper);
    lower = box.workspace_lower ? open_diff_root(box.workspace_lower->fd.get())
                                : open_diff_root(box.workspace_layers.back());
  });
  if (!upper || !lower) throw http::ApiError("invalid_request", "the session has no copy-on-write workspace to diff");
  const bool patch = query_flag(request, "patch");
  WorkspaceDiff found = diff_upper(upper.get(), lower.get(), filter.empty() ? DiffLimits{} : filtered_walk_limits());
  const std::uint64_t left_out = filter.empty() ? 0 : apply_diff_filter(found, filter);
  nlohmann::json answer = patch ? diff_with_patches(found, upper.get(), lower.get()) : found.to_json();
  if (!filter.empty()) {
    answer["filter"] = filter.to_json();
    answer["filter"]["left_out"] = left_out;
  }
  responder.respond(http::json_response(200, answer));
}

nlohmann::json checkpoint(ApiContext& ctx, const http::Request& request, const std::string& id) {
  const nlohmann::json body = parse_body(request);
  if (!body.is_object() || !body.contains("name") || !body["name"].is_string()) {
    throw http::ApiError("invalid_request", "a checkpoint is {\"name\": \"NAME\"}");
  }
  const std::string name = body["name"].get<std::string>();
  nlohmann::json saved;
  ctx.sessions.with_frozen_box(id, [&](const SessionBox& box) { saved = save_checkpoint(box, name); });
  return saved;
}

// The workspace's layers are emptied while the box is down; the new box's workspace upper starts as a copy of
// the checkpoint (seeded by the launcher before anything in the box can look at it).
nlohmann::json reset(ApiContext& ctx, const http::Request& request, const std::string& id) {
  auto it = request.query.find("to");
  const std::optional<std::string> to = it == request.query.end() ? std::nullopt : std::optional(it->second);
  std::string seed;
  if (to) ctx.sessions.with_box(id, [&](const SessionBox& box) { seed = checkpoint_path(box, *to); });
  ctx.sessions.recreate(id, clear_workspace_layers, seed);
  return {{"id", id}, {"reset_to", to ? nlohmann::json(*to) : nlohmann::json("start")}};
}

// A route's work on a worker: it answers `responder` itself.
using RouteWork = void (*)(ApiContext&, const http::Request&, const std::string& id, const http::Responder&);

// The handler of a route over session `{id}`: visibility is checked on the io thread (quick), the rest is done
// by `work` on a worker of `calls` (429 queue_full when they are all taken).
http::Handler on_worker(ApiContext& ctx, BlockingCalls& calls, RouteWork work) {
  return [&ctx, &calls, work](const http::Request& request, http::Responder responder) {
    require_visible_session(ctx, request, request.params.at("id"));
    auto kept = std::make_shared<const http::Request>(request);  // the body (up to 1 MiB) is copied once
    answer_later(calls, request.peer.uid, responder, [&ctx, kept, work](const http::Responder& answer) {
      work(ctx, *kept, kept->params.at("id"), answer);
    });
  };
}

}  // namespace

// Files and diffs under the transfers' bound; checkpoint and reset wait on the session thread, with the session calls.
void register_session_files_api(http::Router& router, ApiContext& ctx) {
  router.add("PUT", "/v1/sessions/{id}/files",
             on_worker(ctx, ctx.transfers, [](ApiContext& c, const http::Request& request, const std::string& id,
                                              const http::Responder& answer) {
               answer.respond(http::json_response(200, put_files(c, request, id)));
             }));
  router.add("GET", "/v1/sessions/{id}/files", on_worker(ctx, ctx.transfers, get_files));
  router.add("GET", "/v1/sessions/{id}/diff", on_worker(ctx, ctx.transfers, diff));
  router.add("POST", "/v1/sessions/{id}/checkpoint",
             on_worker(ctx, ctx.session_calls, [](ApiContext& c, const http::Request& request, const std::string& id,
                                                  const http::Responder& answer) {
               answer.respond(http::json_response(201, checkpoint(c, request, id)));
             }));
  router.add("POST", "/v1/sessions/{id}/reset",
             on_worker(ctx, ctx.session_calls, [](ApiContext& c, const http::Request& request, const std::string& id,
                                                  const http::Responder& answer) {
               answer.respond(http::json_response(200, reset(c, request, id)));
             }));
}

}  // namespace capsule::daemon

// Handlers of the /v1/images routes. Request bodies are validated here (one place per body type); store
// failures (ImageError) become 4xx answers that carry the store's step and detail.
#include "daemon/api/images_api.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/file_util.h"
#include "daemon/auth.h"
#include "daemon/image_access.h"
#include "images/error.h"
#include "images/image_ref.h"
#include "images/image_stack.h"
#include "images/toolchain_select.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

// An image store failure as the API answers it: its code from what the store was doing (an ApiError keeps its own).
std::string image_error_code(const base::Error& e) {
  if (dynamic_cast<const http::ApiError*>(&e)) return e.code();
  if (e.cause().step == "resolve" || e.cause().step == "remove") return "image_not_found";
  if (e.cause().step == "ref") return "invalid_ref";
  if (e.cause().step == "ref_owner") return "forbidden";
  return "invalid_image";
}

std::string dump_line(const json& event) { return event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n"; }

struct ImportRequest {
  std::string source;
  std::string format;  // layout | archive | rootfs
  std::string ref;
  images::RootfsOptions rootfs;
  json sharing = json::object();  // "public", "group" (image_access.h)
};

ImportRequest parse_import(const std::string& text) {
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded()) throw http::ApiError("invalid_json", "the request body is not valid JSON");
  if (!body.is_object()) throw http::ApiError("invalid_request", "body: must be a JSON object");
  static const std::set<std::string> known = {"source", "format", "ref", "labels", "env",
                                            "working_dir", "user", "public", "group"};
  for (const auto& [key, value] : body.items()) {
    if (!known.count(key)) throw http::ApiError("invalid_request", key + ": unknown field");
  }
  auto text_field = [&](const char* key, bool required) {
    if (!body.contains(key)) {
      if (required) throw http::ApiError("invalid_request", std::string(key) + ": is required");
      return std::string();
    }
    if (!body[key].is_string() || body[key].get<std::string>().empty()) {
      throw http::ApiError("invalid_request", std::string(key) + ": must be a non-empty string");
    }
    return body[key].get<std::string>();
  };
  ImportRequest request;
  request.source = text_field("source", true);
  if (request.source.front() != '/') throw http::ApiError("invalid_request", "source: must be an absolute host path");
  request.format = text_field("format", true);
  if (request.format != "layout" && request.format != "archive" && request.format != "rootfs") {
    throw http::ApiError("invalid_request", "format: must be layout, archive or rootfs");
  }
  request.ref = text_field("ref", true);
  const bool rootfs_only = body.contains("labels") || body.contains("env") || body.contains("working_dir") || body.contains("user");
  if (rootfs_only && request.format != "rootfs") {
    throw http::ApiError("invalid_request", "labels, env, working_dir and user describe a rootfs import only");
  }
  if (body.contains("labels")) {
    if (!body["labels"].is_object()) throw http::ApiError("invalid_request", "labels: must be an object of strings");
    for (const auto& [key, value] : body["labels"].items()) {
      if (!value.is_string()) throw http::ApiError("invalid_request", "labels." + key + ": must be a string");
      if (key.rfind(images::kToolchainLabelPrefix, 0) == 0 && !images::is_valid_version(value.get<std::string>())) {
        throw http::ApiError("invalid_request", "labels." + key + ": '" + value.get<std::string>() + "' is not a version");
      }
      if (key == images::kLayerBaseLabel) {
        try {
          images::ImageRef::parse(value.get<std::string>());
        } catch (const base::Error& e) {
          throw http::ApiError("invalid_request", "labels." + key + ": not an image ref (" + e.what() + ")");
        }
      }
      request.rootfs.labels[key] = value.get<std::string>();
    }
  }
  if (body.contains("env")) {
    if (!body["env"].is_array()) throw http::ApiError("invalid_request", "env: must be an array of KEY=VALUE");
    request.rootfs.env.clear();
    for (const auto& item : body["env"]) {
      if (!item.is_string() || item.get<std::string>().find('=') == std::string::npos) {
        throw http::ApiError("invalid_request", "env: must be an array of KEY=VALUE");
      }
      request.rootfs.env.push_back(item.get<std::string>());
    }
  }
  request.rootfs.working_dir = text_field("working_dir", false);
  request.rootfs.user = text_field("user", false);
  for (const char* key : {"public", "group"}) {
    if (body.contains(key)) request.sharing[key] = body[key];
  }
  return request;
}

// True when `path` is a regular file as the caller sees it (the helper decides; no access: not a file).
bool is_regular_for(const Caller& caller, const std::string& path) {
  try {
    open_as_caller(caller, path, HostAccess::kReadFile, "source", "invalid_request");
    return true;
  } catch (const http::ApiError&) {
    return false;
  }
}

// `source` is the path the store reads: the caller's path for root, the opened object for anyone else.
store::Digest run_import(images::ImageStore& store, const ImportRequest& request, const std::string& source,
                         const images::RefWrite& write) {
  if (request.format == "layout") return store.import_layout(source, request.ref, write);
  if (request.format == "archive") return store.import_archive(source, request.ref, write);
  return store.import_rootfs(source, request.ref, request.rootfs, write);
}

// A non-root caller's import source, opened with its credentials: an archive (or a rootfs tarball) is one
// file it can read; a directory must be its own, because the store reads the whole tree.
std::shared_ptr<const OpenedHostPath> open_import_source(const Caller& caller, const ImportRequest& request) {
  if (caller.is_root()) return nullptr;
  const bool directory = request.format == "layout" || (request.format == "rootfs" && !is_regular_for(caller, request.source));
  auto opened = std::make_shared<OpenedHostPath>(open_as_caller(
      caller, request.source, directory ? HostAccess::kReadDir : HostAccess::kReadFile, "source", "invalid_request"));
  if (directory && opened->st.st_uid != caller.uid) {
    throw http::ApiError("forbidden", "source: '" + request.source + "' is owned by uid " +
                                         std::to_string(opened->st.st_uid) + "; " + caller.describe() +
                                         " may only import a directory it owns (or an archive it can read)");
  }
  return opened;
}

bool wants_ndjson(const http::Request& request) {
  auto it = request.headers.find("accept");
  return it != request.headers.end() && it->second.find("application/x-ndjson") != std::string::npos;
}

// POST /v1/images: 201 with the image, or (Accept: application/x-ndjson) events "importing", then "imported"
// with the image or "error" with {"code", "message"}.
void import_image(images::ImageStore& store, ImageJobs& jobs, const AccessPolicy& policy, const http::Request& request,
                  http::Responder responder) {
  ImportRequest import = parse_import(request.body);
  const Caller caller = caller_of(request.peer);
  const images::RefWrite write = ref_write(caller, policy, RefOrigin::kImport, import.sharing);
  const images::RefViewer viewer = ref_viewer(caller, policy);
  const std::shared_ptr<const OpenedHostPath> source = open_import_source(caller, import);
  std::shared_ptr<http::StreamWriter> stream;
  if (wants_ndjson(request)) {
    stream = responder.start_stream(200, "application/x-ndjson");
    stream->write(dump_line({{"event", "importing"}, {"source", import.source}, {"format", import.format}, {"ref", import.ref}}));
  }
  jobs.post([&store, import = std::move(import), source, write, viewer, responder, stream] {
    http::Response answer;
    json event;
    try {
      const std::string path = source ? source->proc_path() : import.source;
      const json image = image_to_json(store.inspect(run_import(store, import, path, write).str(), viewer));
      answer = http::json_response(201, image);
      event = {{"event", "imported"}, {"image", image}};
    } catch (const base::Error& e) {
      answer = http::error_response(image_error_code(e), e.what());
      event = {{"event", "error"}, {"error", {{"code", image_error_code(e)}, {"message", e.what()}}}};
    } catch (const std::exception& e) {
      answer = http::error_response("internal_error", e.what());
      event = {{"event", "error"}, {"error", {{"code", "internal_error"}, {"message", e.what()}}}};
    }
    if (stream) {
      stream->write(dump_line(event));
      stream->finish();
    } else {
      responder.respond(std::move(answer));
    }
  });
}

// Saves for a non-root caller: the archive is written privately by the store, then copied into the file the
// caller opened (created by it, so owned by it); the old content is replaced only once the archive is whole.
void save_into(images::ImageStore& store, const std::string& ref, const images::RefViewer& viewer, OpenedHostPath& target) {
  namespace fs = std::filesystem;
  std::string staging_name = (store.root().parent_path() / ".save-XXXXXX").string();
  if (mkdtemp(staging_name.data()) == nullptr) {
    throw http::ApiError("internal_error", "save: creating a staging dir: " + std::string(std::strerror(errno)));
  }
  const base::ScopedDir scoped(staging_name);
  const fs::path& staging = scoped.path;
  const fs::path archive = staging / "image.tar";
  store.save(ref, archive, viewer);
  base::UniqueFd in(open(archive.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!in || fstat(in.get(), &st) != 0) throw http::ApiError("internal_error", "save: reading the staged archive: " + std::string(std::strerror(errno)));
  auto fail = [&](const char* what) {
    throw http::ApiError("image_save_failed", "path: " + std::string(what) + " '" + target.path + "': " + std::strerror(errno));
  };
  if (ftruncate(target.fd.get(), 0) != 0) fail("truncating");
  if (lseek(target.fd.get(), 0, SEEK_SET) < 0) fail("seeking");
  off_t offset = 0;
  while (offset < st.st_size) {
    const ssize_t sent = sendfile(target.fd.get(), in.get(), &offset, static_cast<std::size_t>(st.st_size - offset));
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) fail("writing");
  }
  if (fsync(target.fd.get()) != 0) fail("syncing");
}

// POST /v1/images/{ref}/save {"path": "/out.tar" | "/out-dir"}.
void save_image(images::ImageStore& store, ImageJobs& jobs, const AccessPolicy& policy, const http::Request& request,
                http::Responder responder) {
  const json body = json::parse(request.body, nullptr, false);
  if (!body.is_object() || !body.contains("path") || !body["path"].is_string() || body.size() != 1 ||
      body["path"].get<std::string>().empty() || body["path"].get<std::string>().front() != '/') {
    throw http::ApiError("invalid_request", "body: must be {\"path\": absolute host path (.tar for an oci-archive)}");
  }
  const std::string ref = request.params.at("ref");
  const std::string path = body["path"].get<std::string>();
  const Caller caller = caller_of(request.peer);
  const images::RefViewer viewer = ref_viewer(caller, policy);
  store.resolve(ref, viewer);  // unknown refs are a 404 now, not a failed job
  std::shared_ptr<OpenedHostPath> target;
  if (!caller.is_root()) {
    if (std::filesystem::path(path).extension() != ".tar") {
      throw http::ApiError("forbidden", "path: " + caller.describe() + " may save an oci-archive (a path ending in "
                                           ".tar) only; layout directories are saved by root");
    }
    target = std::make_shared<OpenedHostPath>(open_as_caller(caller, path, HostAccess::kCreateFile, "path", "invalid_request"));
  }
  jobs.post([&store, ref, path, target, viewer, responder] {
    try {
      if (target) save_into(store, ref, viewer, *target);
      else store.save(ref, path, viewer);
      responder.respond(http::json_response(200, {{"ref", ref}, {"path", path}}));
    } catch (const base::Error& e) {
      responder.respond(http::error_response(image_error_code(e), e.what()));
    } catch (const std::exception& e) {
      responder.respond(http::error_response("internal_error", e.what()));
    }
  });
}

// Runs `fn`, turning store errors into API errors.
template <typename Fn>
auto with_store_errors(Fn&& fn) {
  try {
    return fn();
  } catch (const http::ApiError&) {
    throw;
  } catch (const base::Error& e) {
    throw http::ApiError(image_error_code(e), e.what());
  }
}

}  // namespace

ImageJobs::ImageJobs() : thread_([this] {
  std::unique_lock lock(mutex_);
  for (;;) {
    ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}) {}

ImageJobs::~ImageJobs() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void ImageJobs::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
}

json image_to_json(const images::ImageInfo& image) {
  json layers = json::array();
  for (const auto& digest : image.layer_digests) layers.push_back(digest.str());
  json access = json::object();
  for (const auto& [ref, entry] : image.ref_access) access[ref] = ref_access_json(entry);
  json toolchains = json::object();
  for (const auto& [key, value] : image.config.labels) {
    if (key.rfind(images::kToolchainLabelPrefix, 0) == 0) toolchains[key.substr(images::kToolchainLabelPrefix.size())] = value;
  }
  return {{"digest", image.manifest_digest.str()},
          {"refs", image.refs},
          {"ref_access", access},
          {"size", image.size},
          {"layers", layers},
          {"config",
           {{"env", image.config.env},
            {"working_dir", image.config.working_dir},
            {"user", image.config.user},
            {"labels", image.config.labels}}},
          {"toolchains", toolchains}};
}

void register_images_api(http::Router& router, images::ImageStore& store, ImageJobs& jobs, const AccessPolicy& policy) {
  auto viewer_of = [&policy](const http::Request& request) { return ref_viewer(caller_of(request.peer), policy); };
  router.add("GET", "/v1/images", [&store, viewer_of](const http::Request& request) {
    return with_store_errors([&] {
      json list = json::array();
      for (const auto& image : store.list(viewer_of(request))) list.push_back(image_to_json(image));
      return http::json_response(200, {{"images", list}});
    });
  });
  router.add("POST", "/v1/images", [&store, &jobs, &policy](const http::Request& request, http::Responder responder) {
    import_image(store, jobs, policy, request, std::move(responder));
  });
  router.add("GET", "/v1/images/{ref}", [&store, viewer_of](const http::Request& request) {
    return with_store_errors(
        [&] { return http::json_response(200, image_to_json(store.inspect(request.params.at("ref"), viewer_of(request)))); });
  });
  // {"public": bool, "group": name | gid | null}: who besides the owner may use the ref.
  router.add("PATCH", "/v1/images/{ref}", [&store, viewer_of](const http::Request& request) {
    return with_store_errors([&] {
      const json body = json::parse(request.body, nullptr, false);
      if (body.is_discarded()) throw http::ApiError("invalid_json", "the request body is not valid JSON");
      if (!body.is_object()) throw http::ApiError("invalid_request", "body: must be {\"public\": bool, \"group\": name}");
      for (const auto& item : body.items()) {
        if (item.key() != "public" && item.key() != "group") throw http::ApiError("invalid_request", item.key() + ": unknown field");
      }
      const std::string& ref = request.params.at("ref");
      const images::RefViewer viewer = viewer_of(request);
      const images::ImageInfo before = store.inspect(ref, viewer);
      const std::string name = images::ImageRef::parse(ref).str();
      const auto found = before.ref_access.find(name);
      const images::RefAccess wanted = shared_access(caller_of(request.peer),
                                                     found == before.ref_access.end() ? images::RefAccess{} : found->second, body);
      store.share(ref, wanted, viewer);
      return http::json_response(200, image_to_json(store.inspect(ref, viewer)));
    });
  });
  router.add("DELETE", "/v1/images/{ref}", [&store, viewer_of](const http::Request& request) {
    return with_store_errors(
        [&] { return http::json_response(200, {{"removed", store.remove(request.params.at("ref"), viewer_of(request))}}); });
  });
  router.add("POST", "/v1/images/{ref}/save", [&store, &jobs, &policy](const http::Request& request, http::Responder responder) {
    with_store_errors([&] {
      save_image(store, jobs, policy, request, std::move(responder));
      return 0;
    });
  });
  // Blobs no ref reaches are everyone's garbage: only root or the admin group collects them.
  router.add("POST", "/v1/images/gc", [&store, &policy](const http::Request& request) {
    if (!sees_all_runs(caller_of(request.peer), policy)) {
      throw http::ApiError("forbidden", caller_of(request.peer).describe() + " may not collect the image store's garbage; root does");
    }
    return with_store_errors([&] {
      const images::GcResult result = store.gc();
      json blobs = json::array();
      for (const auto& digest : result.blobs) blobs.push_back(digest.str());
      return http::json_response(200, {{"blobs", blobs}, {"layers", result.layers}, {"bytes", result.blob_bytes}});
    });
  });
}

}  // namespace capsule::daemon

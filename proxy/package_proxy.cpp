// PackageProxy: route handlers (cutoff check, negotiation, filtered views with strong ETags and 304s, files from
// the blob cache, Maven metadata rewriting and artifact masking, frozen replays), run on a worker pool.
#include "proxy/package_proxy.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <map>
#include <mutex>

#include "http/error_status.h"
#include "http/response.h"
#include "store/blob_store.h"
#include "proxy/cache/page_cache.h"
#include "proxy/cache/publish_times.h"
#include "proxy/error.h"
#include "proxy/fair_queue.h"
#include "proxy/maven/checksum.h"
#include "proxy/maven/metadata.h"
#include "proxy/maven/repository_path.h"
#include "proxy/maven_source.h"
#include "proxy/pypi/negotiation.h"
#include "proxy/pypi/page_render.h"
#include "proxy/pypi/project_name.h"
#include "proxy/pypi_source.h"
#include "proxy/upstream/http_client.h"

namespace capsule::proxy {

using http::Request;
using http::Responder;
using http::Response;

namespace {

constexpr std::size_t kMaxViews = 8192;
constexpr std::uint64_t kMaxServedFile = 4ULL << 30;

// A rendered document and its validator; kept per (what, cutoff, format, upstream generation).
struct View {
  std::string body;
  std::string sha256;  // hex of body
  std::string etag;    // strong: "\"<first 32 hex of sha256>\""
  // What the view was made from, when its key names it by address: kept alive with the view, so that address
  // cannot be reused by a newer document while the view is cached.
  std::shared_ptr<const std::string> source;
};

View make_view(std::string body) {
  View view;
  view.sha256 = store::sha256_of(body).hex();
  view.etag = "\"" + view.sha256.substr(0, 32) + "\"";
  view.body = std::move(body);
  return view;
}

// RFC 9110 If-None-Match: "*" or a list of (possibly weak) tags compared weakly.
bool matches_if_none_match(const http::Request& request, const std::string& etag) {
  auto found = request.headers.find("If-None-Match");
  if (found == request.headers.end()) return false;
  std::string_view list = found->second;
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view tag = list.substr(0, comma);
    while (!tag.empty() && (tag.front() == ' ' || tag.front() == '\t')) tag.remove_prefix(1);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

std::string percent_encode_segment(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '!') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string maven_content_type(std::string_view name) {
  if (name.ends_with(".pom") || name.ends_with(".xml")) return "text/xml";
  if (name.ends_with(".jar")) return "application/java-archive";
  if (name.ends_with(".module")) return "application/json";
  if (name.ends_with(".md5") || name.ends_with(".sha1") || name.ends_with(".sha256") || name.ends_with(".sha512"))
    return "text/plain";
  return "application/octet-stream";
}

}  // namespace

struct PackageProxy::State {
  // One sandbox (listener) may hold at most half the workers: the other half stays free for the others.
  explicit State(ProxyOptions o) : options(std::move(o)), pool(options.workers, (options.workers + 1) / 2) {}
  ~State() { pool.join(); }

  ProxyOptions options;
  std::unique_ptr<store::BlobStore> blobs;
  std::unique_ptr<PageCache> pages;
  std::unique_ptr<PublishTimes> times;
  std::unique_ptr<PypiSource> pypi;
  std::unique_ptr<MavenSource> maven;
  FairQueue pool;

  std::mutex views_mutex;
  std::map<std::string, std::shared_ptr<const View>> views;

  template <class Render>
  std::shared_ptr<const View> view(const std::string& key, const Render& render,
                                   std::shared_ptr<const std::string> source = nullptr) {
    {
      std::lock_guard lock(views_mutex);
      if (auto found = views.find(key); found != views.end()) return found->second;
    }
    View rendered = make_view(render());
    rendered.source = std::move(source);
    auto made = std::make_shared<const View>(std::move(rendered));
    std::lock_guard lock(views_mutex);
    if (views.size() >= kMaxViews) views.clear();  // views are cheap to rebuild; keep the bound simple
    return views.emplace(key, made).first->second;
  }

  Cutoff cutoff_for(const http::Request& request, const Listener& listener) const {
    const auto& text = request.params.at("cutoff");
    auto cutoff = parse_cutoff(text);
    if (!cutoff) {
      throw ProxyError("bad_cutoff", "cutoff", text, "expected RFC 3339 (2023-04-11T12:00:00Z) or YYYY-MM-DD");
    }
    if (listener.cutoff && listener.cutoff->at != cutoff->at) {
      throw ProxyError("cutoff_mismatch", "cutoff", text,
                       "this listener serves the snapshot of " + listener.cutoff->text + " only");
    }
    return *cutoff;
  }

  http::Response document(const http::Request& request, const Listener& listener, const View& view, std::string content_type,
                    bool fetched, bool vary_accept) {
    if (listener.log) {
      keep_for_replay(request, view);
      listener.log->add({request.path, view.sha256, view.body.size(), fetched ? "upstream" : "cache"});
    }
    http::Response response;
    response.headers = {{"ETag", view.etag}, {"Cache-Control", "max-age=600"}};
    if (vary_accept) response.headers.emplace_back("Vary", "Accept");
    if (matches_if_none_match(request, view.etag)) {
      response.status = 304;
      response.content_type.clear();
      return response;
    }
    response.content_type = std::move(content_type);
    response.body = view.body;
    return response;
  }

  http::Response blob(const http::Request& request, const Listener& listener, const CachedBlob& blob, std::string content_type) {
    if (listener.log) {
      listener.log->add({request.path, blob.digest.hex(), blob.size, blob.fetched ? "upstream" : "cache"});
    }
    http::Response response;
    const std::string etag = "\"" + blob.digest.hex() + "\"";
    response.headers = {{"ETag", etag}, {"Cache-Control", "max-age=31536000, immutable"}};
    if (matches_if_none_match(request, etag)) {
      response.status = 304;
      response.content_type.clear();
      return response;
    }
    response.content_type = std::move(content_type);
    response.body = blobs->read(blob.digest, kMaxServedFile);
    return response;
  }

  // A logged document's bytes as a blob (nothing is written when the cache has it): a replay serves exactly
  // these, though the page it was rendered from may have changed since. A failure costs only a later replay.
  void keep_for_replay(const http::Request& request, const View& view) {
    try {
      blobs->put_bytes(view.body, store::Digest::from_hex(view.sha256));
    } catch (const std::exception& error) {
      spdlog::error("proxy: keeping {} for replays failed: {}", request.path, error.what());
    }
  }

  // A frozen listener's answer: the original's bytes for a URL it fetched, a refusal naming anything else.
  http::Response frozen_object(const http::Request& request, const Listener& listener) {
    cutoff_for(request, listener);
    const FrozenSet& frozen = *listener.frozen;
    const FrozenObject* object = frozen.find(request.path);
    if (!object) {
      if (auto redirect = canonical_project_redirect(request)) return *redirect;
      if (listener.log) listener.log->refuse(request.path);
      return http::error_response("not_found", frozen.refusal(request.path));
    }
    const auto digest = store::Digest::try_parse("sha256:" + object->sha256);
    if (!digest || !blobs->has(*digest) || blobs->size(*digest) != object->size) {
      throw ProxyError("cache_failure", "replay", request.path,
                       "the bytes the original run " + frozen.original_run() + " received (sha256:" + object->sha256 +
                           ") are no longer in the proxy cache");
    }
    if (listener.log) listener.log->add({request.path, object->sha256, object->size, "frozen"});
    http::Response response;
    const std::string etag = "\"" + object->sha256 + "\"";
    response.headers = {{"ETag", etag}, {"Cache-Control", "max-age=31536000, immutable"}};
    if (matches_if_none_match(request, etag)) {
      response.status = 304;
      response.content_type.clear();
      return response;
    }
    response.body = blobs->read(*digest, kMaxServedFile);
    response.content_type = frozen_content_type(request.path, response.body);
    return response;
  }

  // PEP 503: one canonical URL per project; a project page asked by another spelling is redirected to it.
  std::optional<http::Response> canonical_project_redirect(const http::Request& request) const {
    const auto project = request.params.find("project");
    if (project == request.params.end() || request.params.count("filename")) return std::nullopt;
    const std::string& name = project->second;
    if (!pypi::is_valid_name(name)) return std::nullopt;
    const std::string normalized = pypi::normalize_name(name);
    if (normalized == name && request.path.ends_with('/')) return std::nullopt;
    http::Response response;
    response.status = 301;
    response.content_type.clear();
    response.headers = {{"Location", "/pypi/snapshot/" + percent_encode_segment(request.params.at("cutoff")) +
                                         "/simple/" + normalized + "/"}};
    return response;
  }

  pypi::Negotiated negotiated(const http::Request& request) const {
    const auto accept = request.headers.find("Accept");
    const auto format = request.query.find("format");
    auto result = pypi::negotiate(accept == request.headers.end() ? std::string_view() : accept->second,
                                  format == request.query.end() ? std::string_view() : format->second);
    if (!result) {
      throw ProxyError("not_acceptable", "negotiation", accept == request.headers.end() ? "" : accept->second,
                       "this index serves application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html "
                       "and text/html");
    }
    return *result;
  }

  http::Response pypi_index(const http::Request& request, const Listener& listener) {
    const Cutoff cutoff = cutoff_for(request, listener);
    const auto format = negotiated(request);
    bool fetched = false;
    const auto index = pypi->index(&fetched);
    const bool json = format.format == pypi::Format::kJson;
    const auto view = this->view("index\n" + std::to_string(index->generation) + (json ? "\njson" : "\nhtml"), [&] {
      return json ? pypi::render_index_json(index->index) : pypi::render_index_html(index->index);
    });
    (void)cutoff;  // the list of names is the same for every cutoff; a project's own page is what is masked
    return document(request, listener, *view, format.content_type, fetched, true);
  }

  http::Response pypi_project(const http::Request& request, const Listener& listener) {
    const Cutoff snapshot = cutoff_for(request, listener);
    const auto& name = request.params.at("project");
    if (!pypi::is_valid_name(name)) throw ProxyError("not_found", "pypi-page", name, "not a valid project name");
    const std::string normalized = pypi::normalize_name(name);
    const Cutoff& cutoff = listener.packages.for_pypi(normalized, snapshot);
    if (auto redirect = canonical_project_redirect(request)) return *redirect;
    const auto format = negotiated(request);
    bool fetched = false;
    const auto project = pypi->project(normalized, &fetched);
    const bool json = format.format == pypi::Format::kJson;
    const std::string key = "project\n" + normalized + "\n" + std::to_string(project->generation) + "\n" +
                            cutoff.text + (json ? "\njson" : "\nhtml");
    const auto view = this->view(key, [&] {
      const auto filtered = pypi::filter_page(project->page, cutoff.at, {options.include_undated});
      if (filtered.files.empty()) return std::string();
      const auto url = [&](const pypi::File& file) {
        return "../../files/" + normalized + "/" + percent_encode_segment(file.filename);
      };
      return json ? pypi::render_project_json(filtered, url) : pypi::render_project_html(filtered, url);
    });
    if (view->body.empty()) {
      throw ProxyError("not_found", "pypi-page", normalized, "nothing was published before " + cutoff.text);
    }
    return document(request, listener, *view, format.content_type, fetched, true);
  }

  http::Response pypi_file(const http::Request& request, const Listener& listener) {
    const Cutoff snapshot = cutoff_for(request, listener);
    const std::string project_name = pypi::normalize_name(request.params.at("project"));
    const Cutoff& cutoff = listener.packages.for_pypi(project_name, snapshot);
    std::string filename = request.params.at("filename");
    const auto project = pypi->project(project_name);
    const auto visible = [&](const pypi::File* candidate) {
      return candidate && pypi::is_visible(*candidate, cutoff.at, {options.include_undated}) ? candidate : nullptr;
    };
    bool metadata = false;
    const pypi::File* file = visible(pypi::find_file(project->page, filename));
    if (!file && filename.ends_with(".metadata")) {
      file = visible(pypi::find_file(project->page, std::string_view(filename).substr(0, filename.size() - 9)));
      metadata = file != nullptr;
    }
    if (!file) {
      throw ProxyError("not_found", "pypi-file", project_name + "/" + filename,
                       "no such file was published before " + cutoff.text);
    }
    return blob(request, listener, pypi->file(*project, *file, metadata),
                metadata ? "text/plain; charset=utf-8" : "application/octet-stream");
  }

  // An artifact file's .md5/.sha1/.sha256/.sha512: the upstream's own when it has one, else computed from the
  // file's bytes. Local trees such as Debian's maven-repo carry none: Maven warns for every file without one,
  // and `mvn -C` (strict checksums) fails. Offline, a sidecar not cached is computed from the cached file.
  http::Response artifact_checksum(const http::Request& request, const Listener& listener,
                                   const maven::RepositoryPath& path, maven::ChecksumAlgorithm algorithm) {
    std::optional<CachedBlob> own;
    try {
      own = maven->artifact(path.path);
    } catch (const ProxyError& error) {
      if (error.code() != "offline_miss") throw;
    }
    if (own) return blob(request, listener, *own, "text/plain");
    const std::string main_path = path.main_path();
    const auto file = maven->artifact(main_path);
    if (!file) throw ProxyError("not_found", "maven", main_path, "not in " + maven->describe());
    const std::string name(maven::sidecar_for_checksum(algorithm));
    const auto sidecar = view("checksum\n" + name + "\n" + file->digest.hex(), [&] {
      return maven::checksum_hex_of_file(algorithm, blobs->path(file->digest).string());
    });
    return document(request, listener, *sidecar, "text/plain", file->fetched, false);
  }

  http::Response maven_path(const http::Request& request, const Listener& listener) {
    const Cutoff snapshot = cutoff_for(request, listener);
    const auto& raw = request.params.at("path");
    const auto path = maven::parse_repository_path(raw);
    if (!path) throw ProxyError("not_found", "maven", raw, "not a repository path");
    // An artifact's own cutoff; for metadata the path's candidate group and artifact (an artifact's
    // maven-metadata.xml sits in its <group>/<artifactId>/ directory).
    const Cutoff& cutoff = listener.packages.for_maven(path->group_id, path->artifact_id, snapshot);
    if (path->kind == maven::RepositoryPath::Kind::kArtifact) {
      const auto published = maven->publish_time(path->group_id, path->artifact_id, path->version);
      const std::string gav = path->group_id + ":" + path->artifact_id + ":" + path->version;
      if (published ? *published >= cutoff.at : !options.include_undated) {
        throw ProxyError("not_found", "maven", gav,
                         published ? "published " + base::format_rfc3339(*published) + ", not before " + cutoff.text
                                   : "its publish time is unknown");
      }
      if (const auto algorithm = maven::checksum_for_sidecar(path->sidecar)) {
        return artifact_checksum(request, listener, *path, *algorithm);
      }
      const auto cached = maven->artifact(path->path);
      if (!cached) throw ProxyError("not_found", "maven", path->path, "not in " + maven->describe());
      return blob(request, listener, *cached, maven_content_type(path->path));
    }
    // Metadata and everything else: documents that may change upstream.
    const bool is_metadata = path->kind == maven::RepositoryPath::Kind::kMetadata;
    const std::string document_path = is_metadata ? path->main_path() : path->path;
    bool fetched = false;
    const auto body = maven->document(document_path, &fetched);
    if (!body) throw ProxyError("not_found", "maven", document_path, "not in " + maven->describe());
    std::shared_ptr<const View> view;
    if (is_metadata) {
      const std::string key = "maven\n" + document_path + "\n" +
                              std::to_string(reinterpret_cast<std::uintptr_t>(body.get())) + "\n" + cutoff.text;
      view = this->view(key, [&] {
        const auto info = maven::inspect_metadata(*body);
        if (info.kind != maven::MetadataInfo::Kind::kArtifact) return *body;
        const auto rewritten = maven::rewrite_artifact_metadata(
            *body,
            [&](const std::string& version) { return maven->publish_time(info.group_id, info.artifact_id, version); },
            {cutoff.at, options.include_undated});
        return rewritten.value_or(std::string());
      }, body);
      if (view->body.empty()) {
        throw ProxyError("not_found", "maven", document_path, "no version was published before " + cutoff.text);
      }
      if (!path->sidecar.empty()) {
        const auto algorithm = maven::checksum_for_sidecar(path->sidecar);
        if (!algorithm) {
          throw ProxyError("not_found", "maven", path->path, "the proxy rewrites this document; it has no " +
                                                                        path->sidecar + " of its own");
        }
        const auto sidecar = make_view(maven::checksum_hex(*algorithm, view->body));
        return document(request, listener, sidecar, "text/plain", fetched, false);
      }
      return document(request, listener, *view, "text/xml", fetched, false);
    }
    return document(request, listener, make_view(*body), maven_content_type(document_path), fetched, false);
  }
};

PackageProxy::PackageProxy(ProxyOptions options) : state_(std::make_shared<State>(std::move(options))) {
  State& s = *state_;
  std::filesystem::create_directories(s.options.cache_dir);
  s.blobs = std::make_unique<store::BlobStore>(s.options.cache_dir);
  s.pages = std::make_unique<PageCache>(s.options.cache_dir / "pages");
  s.times = std::make_unique<PublishTimes>(s.options.cache_dir / "publish-times.sqlite");
  std::shared_ptr<HttpClient> client;
  if (!s.options.offline && (!s.options.pypi_mirror || s.options.maven_mirror.empty())) {
    HttpClientOptions client_options;
    client_options.ca_file = s.options.ca_file;
    client = std::make_shared<HttpClient>(client_options);
  }
  auto pypi_upstream = s.options.pypi_mirror ? make_local_pypi_mirror(*s.options.pypi_mirror)
                                             : make_http_pypi_upstream(client, s.options.pypi_index_url);
  auto maven_upstream = !s.options.maven_mirror.empty()
                            ? make_local_maven_mirror(s.options.maven_mirror, s.options.maven_publish_times)
                            : make_http_maven_upstream(client, s.options.maven_url);
  s.pypi = std::make_unique<PypiSource>(s.options, std::move(pypi_upstream), *s.pages, *s.blobs);
  s.maven = std::make_unique<MavenSource>(s.options, std::move(maven_upstream), *s.times, *s.pages, *s.blobs,
                                          s.options.cache_dir / "maven-paths");
}

// Queued and running requests finish first: their responders touch the server's io_context, which the owner
// destroys after the proxy.
PackageProxy::~PackageProxy() { state_->pool.join(); }

const ProxyOptions& PackageProxy::options() const { return state_->options; }

nlohmann::json PackageProxy::stats() const {
  std::lock_guard lock(state_->views_mutex);
  return {{"pypi_upstream_requests", state_->pypi->upstream_requests()},
          {"maven_upstream_requests", state_->maven->upstream_requests()},
          {"views_cached", state_->views.size()}};
}

void PackageProxy::add_routes(http::Router& router, Listener listener) {
  using Method = http::Response (State::*)(const http::Request&, const Listener&);
  // Tasks hold the state; ~PackageProxy joins the pool, so none outlives the proxy.
  const auto route = [&](const std::string& pattern, Method method) {
    router.add("GET", pattern, http::Handler([state = state_, listener, method](const http::Request& request,
                                                                                    http::Responder responder) {
      // Queued per listener: each sandbox's requests wait behind its own, not behind a neighbour's.
      const void* client = listener.log ? static_cast<const void*>(listener.log.get()) : nullptr;
      state->pool.post(client, [state, listener, method, request, responder] {
        try {
          responder.respond(listener.frozen ? state->frozen_object(request, listener)
                                            : ((*state).*method)(request, listener));
        } catch (const base::Error& error) {  // as http/server.cpp answers: the code gives the status
          if (http::status_for(error.code()) >= 500) {
            spdlog::error("proxy: {} {}: {}", request.method, request.target, error.what());
          }
          responder.respond(http::error_response(error.code(), error.what()));
        } catch (const std::exception& error) {
          spdlog::error("proxy: {} {}: {}", request.method, request.target, error.what());
          responder.respond(http::error_response("internal_error", error.what()));
        }
      });
    }));
  };
  route("/pypi/snapshot/{cutoff}/simple/", &State::pypi_index);
  route("/pypi/snapshot/{cutoff}/simple/{project}/", &State::pypi_project);
  route("/pypi/snapshot/{cutoff}/simple/{project}", &State::pypi_project);
  route("/pypi/snapshot/{cutoff}/files/{project}/{filename}", &State::pypi_file);
  route("/maven/snapshot/{cutoff}/{path...}", &State::maven_path);
}

}  // namespace capsule::proxy

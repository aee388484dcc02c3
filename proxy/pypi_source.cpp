// PypiSource: TTL + ETag revalidation of upstream pages (memory, then disk), stale pages served when the
// upstream fails, identical concurrent fetches coalesced, and files verified against the page's sha256.
#include "proxy/pypi_source.h"


#include <spdlog/spdlog.h>

#include <chrono>

#include "base/error.h"
#include "http/error_status.h"
#include "proxy/cache/fetch_lock.h"
#include "proxy/error.h"
#include "proxy/upstream/url.h"

namespace capsule::proxy {
namespace {

constexpr const char* kProjectKind = "pypi-project";
constexpr const char* kIndexKind = "pypi-index";
constexpr const char* kIndexKey = "simple";

Micros now_micros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void offline_pypi_miss(const std::string& what) {
  throw ProxyError("offline_miss", "pypi", what, "not in the cache, and the proxy is offline");
}

}  // namespace

PypiSource::PypiSource(const ProxyOptions& options, std::unique_ptr<PypiUpstream> upstream, PageCache& pages,
                       store::BlobStore& blobs)
    : options_(options), upstream_(std::move(upstream)), pages_(pages), blobs_(blobs) {}

std::shared_ptr<const UpstreamProject> PypiSource::project(const std::string& name, bool* fetched) {
  if (fetched) *fetched = false;
  {
    std::lock_guard lock(mutex_);
    auto found = projects_.find(name);
    if (found != projects_.end() &&
        (options_.offline || std::chrono::steady_clock::now() - found->second.checked < options_.index_ttl))
      return found->second.project;
  }
  return page_flights_.run(name, [&] { return refresh(name, fetched); });
}

std::shared_ptr<const UpstreamProject> PypiSource::adopt(const std::string& name, const CachedPage& page) {
  auto project = std::make_shared<UpstreamProject>();
  project->page = pypi::parse_project_json(page.body);
  project->etag = page.etag;
  project->url = page.url;
  project->generation = ++generation_;
  std::lock_guard lock(mutex_);
  projects_[name] = Entry{project, std::chrono::steady_clock::now()};
  return project;
}

std::shared_ptr<const UpstreamProject> PypiSource::refresh(const std::string& name, bool* fetched) {
  std::shared_ptr<const UpstreamProject> known;
  {
    std::lock_guard lock(mutex_);
    if (auto found = projects_.find(name); found != projects_.end()) known = found->second.project;
  }
  if (!known) {
    if (auto cached = pages_.get(kProjectKind, name)) known = adopt(name, *cached);
  }
  if (options_.offline) {
    if (!known) offline_pypi_miss("project " + name);
    return known;
  }
  UpstreamPage answer;
  try {
    ++upstream_requests_;
    if (fetched) *fetched = true;
    answer = upstream_->project_page(name, known ? known->etag : std::string());
  } catch (const ProxyError& error) {
    if (!known || http::status_for(error.code()) < 500) throw;
    spdlog::warn("proxy: {}; serving the cached page of {}", error.what(), name);
    std::lock_guard lock(mutex_);
    projects_[name] = Entry{known, std::chrono::steady_clock::now()};
    return known;
  }
  if (answer.status == 304 && known) {
    std::lock_guard lock(mutex_);
    projects_[name] = Entry{known, std::chrono::steady_clock::now()};
    return known;
  }
  if (answer.status == 404) {
    std::lock_guard lock(mutex_);
    projects_.erase(name);
    throw ProxyError("not_found", "pypi-page", name, "no such project at " + upstream_->describe());
  }
  if (answer.status != 200) {
    throw ProxyError("bad_upstream", "pypi-page", name, "upstream answered " + std::to_string(answer.status));
  }
  const CachedPage page{answer.body, answer.etag, answer.last_serial, answer.url, now_micros()};
  auto project = adopt(name, page);  // parses first: a malformed page never reaches the disk cache
  pages_.put(kProjectKind, name, page);
  return project;
}

std::shared_ptr<const UpstreamIndex> PypiSource::index(bool* fetched) {
  if (fetched) *fetched = false;
  std::lock_guard lock(mutex_);  // the root index is rare; one fetch at a time is enough
  const auto now = std::chrono::steady_clock::now();
  if (index_ && (options_.offline || now - index_checked_ < options_.index_ttl)) return index_;
  auto adopt_index = [&](const CachedPage& page) {
    auto index = std::make_shared<UpstreamIndex>();
    index->index = pypi::parse_index_json(page.body);
    index->etag = page.etag;
    index->generation = ++generation_;
    index_ = index;
    index_checked_ = now;
  };
  if (!index_) {
    if (auto cached = pages_.get(kIndexKind, kIndexKey)) adopt_index(*cached);
  }
  if (options_.offline) {
    if (!index_) offline_pypi_miss("the project index");
    return index_;
  }
  ++upstream_requests_;
  if (fetched) *fetched = true;
  UpstreamPage answer;
  try {
    answer = upstream_->index_page(index_ ? index_->etag : std::string());
  } catch (const ProxyError& error) {
    if (!index_ || http::status_for(error.code()) < 500) throw;
    spdlog::warn("proxy: {}; serving the cached project index", error.what());
    index_checked_ = now;
    return index_;
  }
  if (answer.status == 304 && index_) {
    index_checked_ = now;
    return index_;
  }
  if (answer.status != 200) {
    throw ProxyError("bad_upstream", "pypi-index", upstream_->describe(),
                     "upstream answered " + std::to_string(answer.status));
  }
  const CachedPage page{answer.body, answer.etag, answer.last_serial, answer.url, now_micros()};
  adopt_index(page);
  pages_.put(kIndexKind, kIndexKey, page);
  return index_;
}

CachedBlob PypiSource::file(const UpstreamProject& project, const pypi::File& file, bool metadata) {
  std::optional<store::Digest> expected;
  std::string hex;
  if (metadata) {
    const auto& advertised = file.core_metadata;
    if (advertised.is_null() || advertised == false)
      throw ProxyError("not_found", "pypi-metadata", file.filename, "the index advertises no metadata file");
    if (advertised.is_object() && advertised.contains("sha256") && advertised["sha256"].is_string())
      hex = advertised["sha256"].get<std::string>();
  } else if (auto found = file.hashes.find("sha256"); found != file.hashes.end()) {
    hex = found->second;
  } else {
    throw ProxyError("unverifiable_file", "pypi-file", file.filename,
                     "the upstream page gives no sha256 for it, so its bytes cannot be checked");
  }
  if (!hex.empty()) {
    expected = store::Digest::try_parse("sha256:" + hex);
    if (!expected) throw ProxyError("bad_upstream", "pypi-file", file.filename, "malformed sha256 " + hex);
    if (blobs_.has(*expected)) return CachedBlob{*expected, blobs_.size(*expected), false};
  }
  if (options_.offline) offline_pypi_miss(file.filename + (metadata ? ".metadata" : ""));
  const auto url = resolve_url(project.url, file.url);
  if (!url) throw ProxyError("bad_upstream", "pypi-file", file.url, "unusable file URL on " + project.url);
  const std::string source = *url + (metadata ? ".metadata" : "");
  return blob_flights_.run(hex.empty() ? source : hex, [&] {
    const FetchLock other_processes(options_.cache_dir, "pypi-file " + (hex.empty() ? source : hex));
    if (expected && blobs_.has(*expected)) return CachedBlob{*expected, blobs_.size(*expected), false};
    auto writer = blobs_.writer(expected, metadata ? std::nullopt : file.size);
    ++upstream_requests_;
    try {
      upstream_->fetch_file(source, [&](const char* data, std::size_t size) { writer.write(data, size); });
      const auto digest = writer.commit();
      return CachedBlob{digest, blobs_.size(digest), true};
    } catch (const ProxyError&) {
      throw;  // the upstream's own failure (unavailable, timeout, ...), already coded
    } catch (const base::Error& error) {  // the blob writer's refusal: the bytes are not what the index promised
      throw ProxyError("hash_mismatch", "pypi-file", source,
                       std::string("the upstream's bytes do not match the index: ") + error.what());
    }
  });
}

}  // namespace capsule::proxy

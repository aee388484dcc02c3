// PypiSource: the PyPI side of the proxy's data — project pages from the upstream, kept in memory and on disk
// and revalidated with their ETag after the TTL, and files copied into the verified blob cache on first use.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "store/blob_store.h"
#include "proxy/cache/page_cache.h"
#include "proxy/cache/singleflight.h"
#include "proxy/proxy_options.h"
#include "proxy/pypi/project_page.h"
#include "proxy/upstream/pypi_upstream.h"

namespace capsule::proxy {

// One upstream project page, parsed. Replaced (never changed) when the upstream's copy changes.
struct UpstreamProject {
  pypi::ProjectPage page;
  std::string etag;
  std::string url;              // base for the page's relative file URLs
  std::uint64_t generation = 0;  // distinct for every parsed body, for keying derived views
};

struct UpstreamIndex {
  pypi::ProjectIndex index;
  std::string etag;
  std::uint64_t generation = 0;
};

struct CachedBlob {
  store::Digest digest;
  std::uint64_t size = 0;
  bool fetched = false;  // true when this call brought it from the upstream
};

class PypiSource {
 public:
  // `upstream` is never called when options.offline is set.
  PypiSource(const ProxyOptions& options, std::unique_ptr<PypiUpstream> upstream, PageCache& pages,
             store::BlobStore& blobs);

  // The project's page (normalized name). `fetched` tells whether the upstream was asked for this call.
  // Throws ProxyError 404 (no such project), 503 (offline and not cached), 502/504 (upstream failed and nothing
  // cached to fall back on).
  std::shared_ptr<const UpstreamProject> project(const std::string& name, bool* fetched = nullptr);
  std::shared_ptr<const UpstreamIndex> index(bool* fetched = nullptr);

  // The file (or its PEP 658 metadata) in the blob cache, fetched and verified against the page's sha256
  // first if needed. Throws ProxyError 404 (no metadata advertised), 502 "hash_mismatch", 503 offline miss.
  CachedBlob file(const UpstreamProject& project, const pypi::File& file, bool metadata);

  std::uint64_t upstream_requests() const { return upstream_requests_; }

 private:
  struct Entry {
    std::shared_ptr<const UpstreamProject> project;
    std::chrono::steady_clock::time_point checked;
  };
  std::shared_ptr<const UpstreamProject> refresh(const std::string& name, bool* fetched);
  std::shared_ptr<const UpstreamProject> adopt(const std::string& name, const CachedPage& page);

  const ProxyOptions& options_;
  std::unique_ptr<PypiUpstream> upstream_;
  PageCache& pages_;
  store::BlobStore& blobs_;
  std::mutex mutex_;
  std::map<std::string, Entry> projects_;
  std::shared_ptr<const UpstreamIndex> index_;
  std::chrono::steady_clock::time_point index_checked_;
  Singleflight<std::string, std::shared_ptr<const UpstreamProject>> page_flights_;
  Singleflight<std::string, CachedBlob> blob_flights_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> upstream_requests_{0};
};

}  // namespace capsule::proxy

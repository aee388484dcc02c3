// PackageProxy: the date-masked PyPI and Maven proxy as HTTP routes. Every view is computed for the cutoff in
// the URL (/pypi/snapshot/{cutoff}/..., /maven/snapshot/{cutoff}/...); a listener may pin one cutoff.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "http/router.h"
#include "proxy/cutoff.h"
#include "proxy/frozen_set.h"
#include "proxy/proxy_options.h"
#include "proxy/served_log.h"

namespace capsule::proxy {

class PypiSource;
class MavenSource;

class PackageProxy {
 public:
  // Opens (creating) the cache under options.cache_dir and builds the upstreams. Throws std::runtime_error or
  // ProxyError when the cache or a mirror cannot be used.
  explicit PackageProxy(ProxyOptions options);
  ~PackageProxy();  // waits for requests being answered; destroy it before the io_context its servers use
  PackageProxy(const PackageProxy&) = delete;
  PackageProxy& operator=(const PackageProxy&) = delete;

  // What one listener serves: with `cutoff` set, URLs naming any other cutoff get 403 (a sandbox cannot look
  // past its own date); `log`, when set, receives every object served, and the exact bytes of every document
  // (index page, metadata, sidecar) are kept in the cache as a blob, as files already are, so a replay can
  // serve them again. With `frozen` (a replay), only its URLs are served, from those blobs, and no upstream is
  // asked; anything else is 404 "not fetched by the original run <id>: <url>", listed in the log's refusals.
  // `packages` (with `cutoff`) dates the packages it names by their own cutoffs instead.
  struct Listener {
    std::optional<Cutoff> cutoff;
    std::shared_ptr<ServedLog> log;
    std::shared_ptr<const FrozenSet> frozen = nullptr;
    PackageCutoffs packages = {};
  };
  // Adds the proxy's GET routes. Handlers answer from a worker pool, never blocking the server's threads.
  void add_routes(http::Router& router, Listener listener);

  const ProxyOptions& options() const;
  // Upstream requests made so far, per side, and how many filtered views are cached.
  nlohmann::json stats() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace capsule::proxy

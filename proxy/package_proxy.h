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
  // past its own date); `log`, when set, receives every object served.
  struct Listener {
    std::optional<Cutoff> cutoff;
    std::shared_ptr<ServedLog> log;
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

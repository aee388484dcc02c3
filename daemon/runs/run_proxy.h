// RunProxy: the package proxy of a `network: "proxy"` run — a loopback port inside the sandbox's own network
// namespace, served from the daemon with the run's cutoff, plus the pip/uv/Maven configuration pointing at it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/server.h"
#include "proxy/cutoff.h"
#include "proxy/package_proxy.h"
#include "proxy/served_log.h"
#include "sandbox/spec.h"
#include "base/unique_fd.h"

namespace capsule::daemon {

inline constexpr std::uint16_t kRunProxyPort = 3141;

// Adds to `spec`: the listener port, PIP_INDEX_URL / UV_INDEX_URL / UV_DEFAULT_INDEX / PIP_CONFIG_FILE=/dev/null
// (host or image pip configuration such as find-links would bypass the date mask, so it is dropped with the
// PIP_/UV_ variables that point elsewhere), CAPSULE_PROXY_URL / CAPSULE_MAVEN_MIRROR, and a fresh writable
// ~/.m2 (settings.xml mirroring `*` to the proxy, an empty local repository) made under `run_dir` and owned
// by the sandbox user's host id (host_id_base + spec.uid) and bound at $HOME/.m2 (HOME from spec.env, else /root).
void add_proxy_to_sandbox(sandbox::SandboxSpec& spec, const proxy::Cutoff& cutoff, const std::string& run_dir,
                          std::uint32_t host_id_base);

// One run's listeners being served. Destroying it stops serving (connections still open are closed). With
// `frozen` (a replay), only the original run's objects are served, from the cache (proxy/frozen_set.h);
// `packages` (the spec's as_of_packages) dates those packages by their own cutoffs.
class RunProxy {
 public:
  RunProxy(boost::asio::io_context& io, proxy::PackageProxy& proxy, const proxy::Cutoff& cutoff,
           std::vector<base::UniqueFd> listeners, std::shared_ptr<const proxy::FrozenSet> frozen = nullptr,
           proxy::PackageCutoffs packages = {});
  ~RunProxy();
  RunProxy(const RunProxy&) = delete;
  RunProxy& operator=(const RunProxy&) = delete;

  // {"port", "upstream": options, "served": [...]} for the run's record, and for a frozen proxy "frozen_from" (the
  // original run's id) and "refused" (URLs it did not serve); `served_from`: leave out the objects
  // served before that many had been (a session exec records what was served while it ran, by any of the
  // session's processes: concurrent execs share the proxy).
  nlohmann::json record(std::size_t served_from = 0) const;
  std::size_t served_count() const { return log_->size(); }

 private:
  proxy::PackageProxy& proxy_;
  std::shared_ptr<proxy::ServedLog> log_;
  std::shared_ptr<const proxy::FrozenSet> frozen_;
  std::unique_ptr<http::HttpServer> server_;
};

// What the run manager needs to serve proxy runs: the daemon's io_context and its one PackageProxy.
struct RunProxyContext {
  boost::asio::io_context* io = nullptr;
  proxy::PackageProxy* proxy = nullptr;
};

}  // namespace capsule::daemon

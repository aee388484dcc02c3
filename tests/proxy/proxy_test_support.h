// Test support for the proxy service tests: the fixture upstream (tests/proxy/fixtures/package_upstream.py) run as a
// child process, and a PackageProxy served on 127.0.0.1 from an in-process HttpServer.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/router.h"
#include "http/server.h"
#include "proxy/package_proxy.h"
#include "proxy/upstream/http_client.h"

namespace capsule::proxy::testing {

// A fresh temporary directory, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct Spawned {
  pid_t pid = -1;
  std::string first_line;  // without the newline; empty when the program printed none before exiting
};
// Runs args[0] (looked up in PATH) with stdout to a pipe, and reads its first line.
Spawned spawn_reading_first_line(std::vector<std::string> args);

// The fixture built under `dir`; with `serve` also served over HTTP until destroyed.
class FixtureUpstream {
 public:
  FixtureUpstream(const std::filesystem::path& dir, bool serve);
  ~FixtureUpstream();
  FixtureUpstream(const FixtureUpstream&) = delete;
  FixtureUpstream& operator=(const FixtureUpstream&) = delete;

  const nlohmann::json& info() const { return info_; }  // pypi_mirror, maven_mirror, maven_publish_times, port
  std::string url(const std::string& path) const;       // http://127.0.0.1:<port><path>
  // Requests the fixture saw for "GET /path" (from its /_stats).
  int count(const std::string& method_and_path) const;
  void control(const nlohmann::json& settings) const;

 private:
  pid_t pid_ = -1;
  nlohmann::json info_;
  std::unique_ptr<HttpClient> client_;
};

// A PackageProxy behind a real HttpServer on 127.0.0.1 (two io threads).
class ServedProxy {
 public:
  explicit ServedProxy(ProxyOptions options, PackageProxy::Listener listener = {});
  ~ServedProxy();

  std::string url(const std::string& path) const;
  PackageProxy& proxy() { return *proxy_; }
  // GET through a client that neither retries nor follows redirects.
  HttpResponse get(const std::string& path, const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Another listener of the same proxy (as a second sandbox has), on its own port; its base URL.
  std::string add_listener(PackageProxy::Listener listener);
  HttpResponse get_url(const std::string& url) { return client_->get(url, {}); }

 private:
  std::unique_ptr<PackageProxy> proxy_;
  std::shared_ptr<http::Router> router_;
  boost::asio::io_context io_;
  std::unique_ptr<http::HttpServer> server_;
  std::vector<std::unique_ptr<http::HttpServer>> more_servers_;
  std::vector<std::thread> threads_;
  unsigned short port_ = 0;
  std::unique_ptr<HttpClient> client_;
};

std::string read_file(const std::filesystem::path& path);

}  // namespace capsule::proxy::testing

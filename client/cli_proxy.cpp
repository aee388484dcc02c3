// `capsule proxy serve`: builds ProxyOptions from a config file and flags, then runs the proxy's routes on an
// HttpServer bound to loopback with two io threads until a signal asks it to stop.
#include "client/cli_proxy.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "http/router.h"
#include "http/server.h"
#include "proxy/package_proxy.h"
#include "spec/as_of.h"

namespace capsule::client {
namespace {

std::string default_cache_dir() {
  if (geteuid() == 0) return "/var/cache/capsule/proxy";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg == '/') return std::string(xdg) + "/capsule/proxy";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/capsule/proxy";
}

}  // namespace

nlohmann::json package_cutoffs_request(const std::vector<std::string>& flags) {
  nlohmann::json request = nlohmann::json::object();
  for (const std::string& flag : flags) {
    const auto equals = flag.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw std::invalid_argument("--as-of-package: expected NAME=DATE (a PyPI project or Maven groupId:artifactId), "
                                  "got \"" + flag.substr(0, 128) + "\"");
    }
    const std::string name = flag.substr(0, equals);
    nlohmann::json& packages = request[name.find(':') == std::string::npos ? "pypi" : "maven"];
    if (packages.contains(name)) throw std::invalid_argument("--as-of-package: " + name + " is given twice");
    packages[name] = flag.substr(equals + 1);
  }
  return request;
}

nlohmann::json proxy_options_json(const ProxyServeOptions& options) {
  nlohmann::json object = nlohmann::json::object();
  if (!options.config_file.empty()) {
    std::ifstream in(options.config_file);
    if (!in) throw std::runtime_error("cannot read " + options.config_file);
    try {
      object = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(options.config_file + ": not JSON: " + e.what());
    }
  }
  const auto set = [&](const char* key, const std::string& value) {
    if (!value.empty()) object[key] = value;
  };
  set("cache_dir", options.cache_dir);
  set("pypi_index_url", options.pypi_index_url);
  set("pypi_mirror", options.pypi_mirror);
  set("maven_url", options.maven_url);
  set("maven_publish_times", options.maven_publish_times);
  if (!options.maven_mirror.empty()) object["maven_mirror"] = options.maven_mirror;
  if (options.offline) object["offline"] = true;
  if (options.include_undated) object["include_undated"] = true;
  return object;
}

int cmd_proxy_serve(const ProxyServeOptions& options) {
  const auto colon = options.listen.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("--listen: expected ADDRESS:PORT");
  std::string address = options.listen.substr(0, colon);
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') address = address.substr(1, address.size() - 2);
  unsigned long port = 0;
  try {
    std::size_t used = 0;
    port = std::stoul(options.listen.substr(colon + 1), &used);
    if (used != options.listen.size() - colon - 1 || port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    throw std::invalid_argument("--listen: bad port in " + options.listen);
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("capsule proxy"));  // stdout: only the "listening on" line
  boost::asio::io_context io;  // declared first: the proxy's workers answer through it until the proxy is gone
  proxy::PackageProxy package_proxy(proxy::parse_proxy_options(proxy_options_json(options), default_cache_dir()));
  auto router = std::make_shared<http::Router>();
  proxy::PackageProxy::Listener listener;
  listener.packages = spec::parse_package_cutoffs(package_cutoffs_request(options.as_of_packages), "--as-of-package");
  package_proxy.add_routes(*router, listener);
  http::ServerOptions server_options;
  server_options.max_connections = 1024;
  http::HttpServer server(io, std::shared_ptr<const http::Router>(router), server_options);
  const auto bound = server.listen_tcp(address, static_cast<unsigned short>(port));
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) { server.stop(); io.stop(); });
  const std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  std::cerr << "capsule proxy: " << package_proxy.options().to_json().dump() << "\n";
  if (!listener.packages.empty()) {
    std::cerr << "capsule proxy: packages dated by their own cutoffs: "
              << spec::package_cutoffs_json(listener.packages).dump() << "\n";
  }
  std::cerr
            << "capsule proxy: pip index http://" << host << ":" << bound
            << "/pypi/snapshot/<cutoff>/simple/, Maven mirror http://" << host << ":" << bound
            << "/maven/snapshot/<cutoff>/\n";
  std::cout << "listening on http://" << host << ":" << bound << std::endl;
  std::thread second([&] { io.run(); });
  io.run();
  second.join();
  return 0;
}

}  // namespace capsule::client

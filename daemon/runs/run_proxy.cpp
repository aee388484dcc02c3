// RunProxy: per-run environment and Maven settings for the in-sandbox proxy, and an HttpServer over the listening
// sockets the launcher opened in the sandbox's network namespace.
#include "daemon/runs/run_proxy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace capsule::daemon {
namespace {

bool is_dropped_variable(const std::string& entry) {
  static const char* kDropped[] = {"PIP_INDEX_URL=", "PIP_EXTRA_INDEX_URL=", "PIP_FIND_LINKS=", "PIP_NO_INDEX=",
                                   "PIP_CONFIG_FILE=", "PIP_TRUSTED_HOST=", "UV_INDEX_URL=", "UV_EXTRA_INDEX_URL=",
                                   "UV_DEFAULT_INDEX=", "UV_INDEX=", "UV_FIND_LINKS=", "PIP_CERT=", "UV_NO_INDEX="};
  return std::any_of(std::begin(kDropped), std::end(kDropped),
                     [&](const char* prefix) { return entry.rfind(prefix, 0) == 0; });
}

std::string maven_settings(const std::string& mirror_url) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<!-- Written by capsuled for a network: proxy run: every repository is read through the date-masked\n"
         "     proxy in this sandbox. -->\n"
         "<settings xmlns=\"http://maven.apache.org/SETTINGS/1.0.0\">\n"
         "  <mirrors>\n"
         "    <mirror>\n"
         "      <id>capsule-proxy</id>\n"
         "      <mirrorOf>*</mirrorOf>\n"
         "      <url>" + mirror_url + "</url>\n"
         "    </mirror>\n"
         "  </mirrors>\n"
         "</settings>\n";
}

std::string home_of(const std::vector<std::string>& env) {
  for (const auto& entry : env) {
    if (entry.rfind("HOME=", 0) == 0) return entry.substr(5);
  }
  return "/root";
}

}  // namespace

void add_proxy_to_sandbox(sandbox::SandboxSpec& spec, const proxy::Cutoff& cutoff, const std::string& run_dir,
                          std::uint32_t host_id_base) {
  const std::string home = home_of(spec.env);
  const std::string base = "http://127.0.0.1:" + std::to_string(kRunProxyPort);
  const std::string index = base + "/pypi/snapshot/" + cutoff.text + "/simple/";
  const std::string mirror = base + "/maven/snapshot/" + cutoff.text + "/";
  spec.loopback_listeners.push_back(kRunProxyPort);
  std::erase_if(spec.env, is_dropped_variable);
  for (const auto& entry : {"PIP_INDEX_URL=" + index, "UV_INDEX_URL=" + index, "UV_DEFAULT_INDEX=" + index,
                            std::string("PIP_CONFIG_FILE=/dev/null"), "CAPSULE_PROXY_URL=" + base,
                            "CAPSULE_MAVEN_MIRROR=" + mirror}) {
    spec.env.push_back(entry);
  }

  const std::filesystem::path m2 = std::filesystem::path(run_dir) / "m2";
  std::filesystem::create_directories(m2 / "repository");
  std::ofstream settings(m2 / "settings.xml");
  settings << maven_settings(mirror);
  if (!settings.flush()) throw std::runtime_error("cannot write " + (m2 / "settings.xml").string());
  // Owned by the sandbox user's host id, so the bind maps that user onto it and Maven can fill the repository.
  const uid_t owner = host_id_base + spec.uid;
  const gid_t group = host_id_base + spec.gid;
  for (const auto& path : {m2, m2 / "repository", m2 / "settings.xml"}) {
    if (chown(path.c_str(), owner, group) != 0) throw std::runtime_error("cannot chown " + path.string());
  }
  const std::string target = (std::filesystem::path(home.empty() ? "/root" : home) / ".m2").lexically_normal();
  spec.mounts.push_back(sandbox::BindMount{m2.string(), target, false, true});
}

RunProxy::RunProxy(boost::asio::io_context& io, proxy::PackageProxy& proxy, const proxy::Cutoff& cutoff,
                   std::vector<base::UniqueFd> listeners, std::shared_ptr<const proxy::FrozenSet> frozen,
                   proxy::PackageCutoffs packages)
    : proxy_(proxy), log_(std::make_shared<proxy::ServedLog>()), frozen_(std::move(frozen)) {
  auto router = std::make_shared<http::Router>();
  proxy.add_routes(*router, {cutoff, log_, frozen_, std::move(packages)});
  http::ServerOptions options;
  options.max_connections = 64;  // one sandbox's clients; a hostile one cannot starve the daemon
  server_ = std::make_unique<http::HttpServer>(io, std::shared_ptr<const http::Router>(router), options);
  for (auto& fd : listeners) server_->listen_fd(fd.release());
}

RunProxy::~RunProxy() { server_->stop(); }

nlohmann::json RunProxy::record(std::size_t served_from) const {
  nlohmann::json out = {
      {"port", kRunProxyPort}, {"upstream", proxy_.options().to_json()}, {"served", log_->to_json(served_from)}};
  if (frozen_) {
    out["frozen_from"] = frozen_->original_run();
    out["refused"] = log_->refused_json();
  }
  return out;
}

}  // namespace capsule::daemon

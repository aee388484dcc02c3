// `capsule proxy serve`: the date-masked package proxy on a loopback port, standalone, for harnesses that run
// their own containers (a drop-in for pypi-timemachine: /pypi/snapshot/{cutoff}/simple/).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace capsule::client {

struct ProxyServeOptions {
  std::string listen = "127.0.0.1:3141";  // loopback address:port; port 0 picks a free one
  std::string config_file;                // a JSON object with the keys of capsuled's "proxy" config
  std::string cache_dir;
  std::string pypi_index_url;
  std::string pypi_mirror;
  std::string maven_url;
  std::vector<std::string> maven_mirror;
  std::string maven_publish_times;
  bool offline = false;
  bool include_undated = false;
  // --as-of-package NAME=DATE: NAME's own cutoff instead of the URL's, for every URL (a PyPI project, or a Maven
  // "groupId:artifactId"; DATE as --as-of takes it, spans resolved at start).
  std::vector<std::string> as_of_packages;
};

// The "proxy" options object these flags stand for (flags override the config file's keys).
nlohmann::json proxy_options_json(const ProxyServeOptions& options);
// The --as-of-package flags as a run's as_of_packages object ({"pypi": {name: DATE}, "maven": {"g:a": DATE}}: a
// NAME with a colon is Maven's), to be read by spec::parse_package_cutoffs like a spec's. Throws
// std::invalid_argument for a flag without "=" or a NAME given twice.
nlohmann::json package_cutoffs_request(const std::vector<std::string>& flags);
// Serves until SIGINT or SIGTERM; prints "listening on http://ADDRESS:PORT" on stdout once ready.
int cmd_proxy_serve(const ProxyServeOptions& options);

}  // namespace capsule::client

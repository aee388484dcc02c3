// ProxyOptions: how a package proxy is set up (upstreams or local mirrors, cache directory, offline mode, undated
// files, freshness), parsed from one JSON object: the "proxy" key of capsuled's config, or `capsule proxy serve`.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace capsule::proxy {

struct ProxyOptions {
  std::filesystem::path cache_dir;  // blobs, upstream pages, publish times
  bool offline = false;             // cache only: a miss is 503 and no connection is ever opened
  bool include_undated = false;     // files/versions without a publish time are shown (hidden by default)
  std::chrono::seconds index_ttl{600};  // upstream pages younger than this are not revalidated

  std::string pypi_index_url = "https://pypi.org/simple/";
  std::optional<std::filesystem::path> pypi_mirror;  // a local PEP 691 tree instead of pypi_index_url

  std::string maven_url = "https://repo.maven.apache.org/maven2/";
  std::vector<std::filesystem::path> maven_mirror;  // local repository trees instead of maven_url
  std::optional<std::filesystem::path> maven_publish_times;  // "g:a:v <RFC 3339>" lines for the local trees

  std::string ca_file;          // PEM bundle for upstream TLS; empty: the system's
  std::size_t workers = 8;      // threads doing upstream fetches and file reads

  nlohmann::json to_json() const;  // as recorded with runs and printed by `capsule proxy serve`
};

// The one validation point: keys cache_dir, offline, include_undated, index_ttl_seconds, pypi_index_url,
// pypi_mirror, maven_url, maven_mirror (string or list), maven_publish_times, ca_file, workers. Unknown keys and
// bad values throw std::invalid_argument naming the key. `cache_dir` defaults to `default_cache_dir`.
ProxyOptions parse_proxy_options(const nlohmann::json& object, const std::filesystem::path& default_cache_dir);

}  // namespace capsule::proxy

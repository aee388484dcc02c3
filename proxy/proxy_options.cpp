// parse_proxy_options: checks every key once, so the daemon's config file and the CLI agree on one meaning.
#include "proxy/proxy_options.h"

#include <set>
#include <stdexcept>

#include "proxy/upstream/url.h"

namespace capsule::proxy {
namespace {

[[noreturn]] void invalid(const std::string& key, const std::string& problem) {
  throw std::invalid_argument("proxy." + key + ": " + problem);
}

std::string string_value(const nlohmann::json& value, const std::string& key) {
  if (!value.is_string() || value.get<std::string>().empty()) invalid(key, "must be a non-empty string");
  return value.get<std::string>();
}

std::filesystem::path absolute_path(const nlohmann::json& value, const std::string& key) {
  const std::filesystem::path path = string_value(value, key);
  if (!path.is_absolute()) invalid(key, "must be an absolute path");
  return path.lexically_normal();
}

std::string index_url(const nlohmann::json& value, const std::string& key) {
  std::string url = string_value(value, key);
  if (!parse_url(url)) invalid(key, "must be an absolute http(s) URL");
  if (url.back() != '/') url += '/';
  return url;
}

}  // namespace

ProxyOptions parse_proxy_options(const nlohmann::json& object, const std::filesystem::path& default_cache_dir) {
  if (!object.is_object()) throw std::invalid_argument("proxy: must be an object");
  static const std::set<std::string> kKeys{"cache_dir",  "offline",   "include_undated",     "index_ttl_seconds",
                                           "pypi_index_url", "pypi_mirror", "maven_url", "maven_mirror",
                                           "maven_publish_times", "ca_file", "workers"};
  for (const auto& [key, value] : object.items()) {
    if (!kKeys.count(key)) invalid(key, "unknown key");
  }
  ProxyOptions options;
  options.cache_dir = default_cache_dir;
  if (object.contains("cache_dir")) options.cache_dir = absolute_path(object["cache_dir"], "cache_dir");
  for (const auto* flag : {"offline", "include_undated"}) {
    if (!object.contains(flag)) continue;
    if (!object[flag].is_boolean()) invalid(flag, "must be true or false");
    (std::string(flag) == "offline" ? options.offline : options.include_undated) = object[flag].get<bool>();
  }
  if (object.contains("index_ttl_seconds")) {
    const auto& ttl = object["index_ttl_seconds"];
    if (!ttl.is_number_unsigned() || ttl.get<std::uint64_t>() > 7 * 86400) invalid("index_ttl_seconds", "must be 0-604800");
    options.index_ttl = std::chrono::seconds(ttl.get<std::uint64_t>());
  }
  if (object.contains("pypi_index_url")) options.pypi_index_url = index_url(object["pypi_index_url"], "pypi_index_url");
  if (object.contains("pypi_mirror")) options.pypi_mirror = absolute_path(object["pypi_mirror"], "pypi_mirror");
  if (object.contains("pypi_index_url") && options.pypi_mirror) invalid("pypi_mirror", "conflicts with pypi_index_url");
  if (object.contains("maven_url")) options.maven_url = index_url(object["maven_url"], "maven_url");
  if (object.contains("maven_mirror")) {
    const auto& mirror = object["maven_mirror"];
    if (mirror.is_array()) {
      for (const auto& root : mirror) options.maven_mirror.push_back(absolute_path(root, "maven_mirror"));
      if (options.maven_mirror.empty()) invalid("maven_mirror", "must name at least one directory");
    } else {
      options.maven_mirror.push_back(absolute_path(mirror, "maven_mirror"));
    }
    if (object.contains("maven_url")) invalid("maven_mirror", "conflicts with maven_url");
  }
  if (object.contains("maven_publish_times")) {
    options.maven_publish_times = absolute_path(object["maven_publish_times"], "maven_publish_times");
    if (options.maven_mirror.empty()) invalid("maven_publish_times", "only applies to a maven_mirror");
  }
  if (object.contains("ca_file")) options.ca_file = absolute_path(object["ca_file"], "ca_file").string();
  if (object.contains("workers")) {
    const auto& workers = object["workers"];
    if (!workers.is_number_unsigned() || workers.get<std::uint64_t>() < 1 || workers.get<std::uint64_t>() > 256)
      invalid("workers", "must be 1-256");
    options.workers = workers.get<std::size_t>();
  }
  return options;
}

nlohmann::json ProxyOptions::to_json() const {
  nlohmann::json out{{"cache_dir", cache_dir.string()},
                     {"offline", offline},
                     {"include_undated", include_undated},
                     {"index_ttl_seconds", index_ttl.count()},
                     {"workers", workers}};
  if (pypi_mirror) out["pypi_mirror"] = pypi_mirror->string();
  else out["pypi_index_url"] = pypi_index_url;
  if (!maven_mirror.empty()) {
    out["maven_mirror"] = nlohmann::json::array();
    for (const auto& root : maven_mirror) out["maven_mirror"].push_back(root.string());
    if (maven_publish_times) out["maven_publish_times"] = maven_publish_times->string();
  } else {
    out["maven_url"] = maven_url;
  }
  if (!ca_file.empty()) out["ca_file"] = ca_file;
  return out;
}

}  // namespace capsule::proxy

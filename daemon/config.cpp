// The capsuled configuration file: a flat JSON object, checked key by key.
// Limits use the same syntax as a RunSpec's "limits" ("10m", "4g").
#include "daemon/config.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "client/units.h"

namespace capsule::daemon {

std::string cgroup_parent_for(const std::string& state_dir) {
  if (state_dir == DaemonConfig{}.state_dir) return "capsule";
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a: stable across builds, unlike std::hash
  for (unsigned char c : state_dir) hash = (hash ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("capsule-") + text;
}

void load_config_file(const std::string& path, DaemonConfig& config) {
  std::ifstream file(path);
  if (!file) throw std::invalid_argument("cannot read config file " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
  if (!j.is_object()) throw std::invalid_argument(path + ": must be a JSON object");
  auto text = [&](const char* key) {
    if (!j[key].is_string()) throw std::invalid_argument(path + ": " + key + " must be a string");
    return j[key].get<std::string>();
  };
  auto number = [&](const char* key) {
    if (!j[key].is_number_unsigned()) throw std::invalid_argument(path + ": " + key + " must be a positive integer");
    return j[key].get<std::uint64_t>();
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "socket") config.socket_path = text("socket");
    else if (key == "socket_group") config.socket_group = text("socket_group");
    else if (key == "state_dir") config.state_dir = text("state_dir");
    else if (key == "policies_dir") config.policies_dir = text("policies_dir");
    else if (key == "max_concurrent") config.max_concurrent = number("max_concurrent");
    else if (key == "max_queue") config.max_queue = number("max_queue");
    else if (key == "host_id_base") config.host_id_base = static_cast<std::uint32_t>(number("host_id_base"));
    else if (key == "cgroup_parent") config.cgroup_parent = text("cgroup_parent");
    else if (key == "drain_grace_ms") config.drain_grace_ms = number("drain_grace_ms");
    else if (key == "max_wall_time") config.limits.maxima.wall_time = client::parse_duration(text("max_wall_time"));
    else if (key == "max_memory") config.limits.maxima.memory_bytes = client::parse_size(text("max_memory"));
    else if (key == "default_wall_time") config.limits.defaults.wall_time = client::parse_duration(text("default_wall_time"));
    else if (key == "default_memory") config.limits.defaults.memory_bytes = client::parse_size(text("default_memory"));
    else throw std::invalid_argument(path + ": unknown key '" + key + "'");
  }
  if (config.max_concurrent == 0) throw std::invalid_argument(path + ": max_concurrent must be at least 1");
}

}  // namespace capsule::daemon

// The capsuled configuration file: a flat JSON object, checked key by key.
// "default_limits" and "max_limits" use the vocabulary of a RunSpec's "limits" (spec/limits.h; 0 in max_limits: no ceiling).
#include "daemon/config.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "base/units.h"

namespace capsule::daemon {

std::string cgroup_parent_for(const std::string& state_dir) {
  if (state_dir == DaemonConfig{}.state_dir) return "capsule";
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a: stable across builds, unlike std::hash
  for (unsigned char c : state_dir) hash = (hash ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("capsule-") + text;
}

std::uint64_t parent_cpu_weight(const DaemonConfig& config) {
  return config.cpu_weight != 0 ? config.cpu_weight : config.max_concurrent;
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
  auto size = [&](const char* key) -> std::uint64_t {
    if (j[key].is_number_unsigned()) return j[key].get<std::uint64_t>();
    if (!j[key].is_string()) throw std::invalid_argument(path + ": " + key + " must be bytes or a size such as \"1g\"");
    try {
      return base::parse_size(j[key].get<std::string>());
    } catch (const std::exception& e) {
      throw std::invalid_argument(path + ": " + key + ": " + e.what());
    }
  };
  // The same parser and checks as a RunSpec's "limits", so a default can never be a value a run may not ask for.
  auto limits = [&](const char* key) {
    try {
      return spec::parse_limit_values(j[key], key);
    } catch (const std::exception& e) {
      throw std::invalid_argument(path + ": " + e.what());
    }
  };
  for (const auto& [key, value] : j.items()) {
    if (key == "socket") config.socket_path = text("socket");
    else if (key == "socket_group") config.socket_group = text("socket_group");
    else if (key == "admin_group") config.admin_group = text("admin_group");
    else if (key == "state_dir") config.state_dir = text("state_dir");
    else if (key == "policies_dir") config.policies_dir = text("policies_dir");
    else if (key == "python_releases") config.python_releases = text("python_releases");
    else if (key == "max_concurrent") config.max_concurrent = number("max_concurrent");
    else if (key == "max_queue") config.max_queue = number("max_queue");
    else if (key == "max_stacks") config.max_stacks = number("max_stacks");
    else if (key == "published_port_idle_timeout_s") {
      config.published_port_idle_timeout_s = number("published_port_idle_timeout_s");
    }
    else if (key == "pool_boxes") config.pool_boxes = number("pool_boxes");
    else if (key == "pool_environments") config.pool_environments = number("pool_environments");
    else if (key == "pool_idle_ttl_s") config.pool_idle_ttl_s = number("pool_idle_ttl_s");
    else if (key == "host_id_base") config.host_id_base = static_cast<std::uint32_t>(number("host_id_base"));
    else if (key == "cgroup_parent") config.cgroup_parent = text("cgroup_parent");
    else if (key == "cpu_weight") {
      constexpr std::uint64_t kMaxCpuWeight = 10000;
      if (value == "auto") {
        config.cpu_weight = 0;
      } else if (!value.is_number_unsigned() || value.get<std::uint64_t>() == 0 ||
                 value.get<std::uint64_t>() > kMaxCpuWeight) {
        throw std::invalid_argument(path + ": cpu_weight must be \"auto\" or 1 to " + std::to_string(kMaxCpuWeight) +
                                    " (host processes' worth of CPU weight)");
      } else {
        config.cpu_weight = value.get<std::uint64_t>();
      }
    }
    else if (key == "drain_grace_ms") config.drain_grace_ms = number("drain_grace_ms");
    else if (key == "default_limits") spec::overlay(config.limits.defaults, limits("default_limits"));
    else if (key == "max_limits") spec::overlay(config.limits.maxima, limits("max_limits"));
    else if (key == "min_free_bytes") config.storage.min_free_bytes = size("min_free_bytes");
    else if (key == "min_free_inodes") config.storage.min_free_inodes = number("min_free_inodes");
    else if (key == "proxy") config.proxy = value;  // checked by parse_proxy_options when capsuled starts
    else if (key == "log_cap_bytes") config.log_cap_bytes = number("log_cap_bytes");
    else if (key == "retention_max_age_days") config.retention_max_age_days = number("retention_max_age_days");
    else if (key == "retention_max_total_bytes") config.retention_max_total_bytes = number("retention_max_total_bytes");
    else if (key == "retention_interval_s") config.retention_interval_s = number("retention_interval_s");
    else if (key == "outputs_keep_days") config.outputs.keep_days = number("outputs_keep_days");
    else if (key == "outputs_max_total_bytes") config.outputs.max_total_bytes = size("outputs_max_total_bytes");
    else if (key == "outputs_max_layer_bytes") config.outputs.max_layer_bytes = size("outputs_max_layer_bytes");
    else if (key == "snapshots_keep_days") config.snapshots.keep_days = number("snapshots_keep_days");
    else if (key == "snapshots_max_total_bytes") config.snapshots.max_total_bytes = size("snapshots_max_total_bytes");
    else throw std::invalid_argument(path + ": unknown key '" + key + "'");
  }
  if (config.max_concurrent == 0) throw std::invalid_argument(path + ": max_concurrent must be at least 1");
  if (config.log_cap_bytes != 0 && config.log_cap_bytes < 4096) {
    throw std::invalid_argument(path + ": log_cap_bytes must be 0 (no cap) or at least 4096");
  }
  if (config.pool_boxes > 64) throw std::invalid_argument(path + ": pool_boxes must be at most 64");
  if (config.pool_environments == 0 || config.pool_environments > 64) {
    throw std::invalid_argument(path + ": pool_environments must be 1 to 64");
  }
  if (config.pool_idle_ttl_s == 0 || config.pool_idle_ttl_s > 7 * 24 * 3600) {
    throw std::invalid_argument(path + ": pool_idle_ttl_s must be 1 to 604800 (7 days)");
  }
  if (config.published_port_idle_timeout_s == 0 || config.published_port_idle_timeout_s > 7 * 24 * 3600) {
    throw std::invalid_argument(path + ": published_port_idle_timeout_s must be 1 to 604800 (7 days)");
  }
  if (config.snapshots.keep_days > SnapshotRetention::kMaxKeepDays) {
    throw std::invalid_argument(path + ": snapshots_keep_days must be at most " +
                                std::to_string(SnapshotRetention::kMaxKeepDays));
  }
  if (config.retention_interval_s == 0) throw std::invalid_argument(path + ": retention_interval_s must be at least 1");
}

}  // namespace capsule::daemon

// DaemonConfig: where capsuled listens and keeps state, how many sandboxes it runs, and the limit
// defaults and ceilings; read from a JSON config file, then overridden by command-line flags.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/runs/disk_guard.h"
#include "daemon/runs/run_outputs.h"
#include "daemon/snapshots/snapshot_store.h"
#include "spec/limits.h"

namespace capsule::daemon {

struct DaemonConfig {
  std::string socket_path = "/run/capsule/capsule.sock";
  std::string socket_group = "capsule";  // used when the group exists; else root's group
  std::string admin_group;               // members see and cancel every run, as root; empty: none (docs/security.md)
  std::string state_dir = "/var/lib/capsule";
  // Empty: the install's data dir, found from capsuled's own location (install_layout.h): share/capsule/policies
  // and share/capsule/data/python-releases.json (in the build tree: the source's policies/ and images/data/).
  std::string policies_dir;
  std::string python_releases;
  std::size_t max_concurrent = 8;
  std::size_t max_queue = 256;
  std::size_t max_stacks = 16;            // live stacks at once (daemon/stacks/); a non-root user a quarter
  std::uint64_t published_port_idle_timeout_s = 600;  // a stack's relayed connection moving no byte: closed
  // Boxes made ahead for the environments runs ask for (sandbox/box_pool.h), each used by one run; they are not
  // counted in max_concurrent. pool_boxes per environment (0: none), at most pool_environments at once, an
  // environment let go after pool_idle_ttl_s without a run.
  std::size_t pool_boxes = 2;
  std::size_t pool_environments = 4;
  std::uint64_t pool_idle_ttl_s = 600;
  std::uint32_t host_id_base = 100000;
  std::string cgroup_parent;              // empty: cgroup_parent_for(state_dir)
  // "cpu_weight": the cgroup parent's CPU weight in default host processes' worth (sandbox CgroupConfig's
  // parent_cpu_weight); 0 is "auto": max_concurrent.
  std::uint64_t cpu_weight = 0;
  std::uint64_t drain_grace_ms = 30000;  // SIGTERM: running sandboxes get this long before cancellation
  spec::LimitPolicy limits = spec::default_limit_policy();
  StorageWatermark storage;              // "min_free_bytes" ("1g" or bytes), "min_free_inodes"
  nlohmann::json proxy = nlohmann::json::object();  // the package proxy's options (proxy/proxy_options.h)
  std::uint64_t log_cap_bytes = 64ull << 20;       // stored log per stream (decompressed); 0: no cap
  std::uint64_t retention_max_age_days = 0;        // finished runs older than this are removed; 0: kept
  std::uint64_t retention_max_total_bytes = 0;     // logs + records beyond this: oldest finished removed; 0: no limit
  std::uint64_t retention_interval_s = 3600;       // how often retention runs (also once at start)
  // Finished runs' outputs (their upper layers): "outputs_keep_days" (0: none kept), "outputs_max_total_bytes"
  // (0: no limit), "outputs_max_layer_bytes" (one upper); swept with the retention above.
  OutputsPolicy outputs;
  SnapshotRetention snapshots;  // unused snapshots' collection, with the retention above
};

// "capsule" for the default state dir; "capsule-<hash of the path>" for any other, so that daemons with
// different state dirs never take each other's sandboxes for leftovers.
std::string cgroup_parent_for(const std::string& state_dir);

// The weight the cgroup parent gets: cpu_weight, or max_concurrent for "auto".
std::uint64_t parent_cpu_weight(const DaemonConfig& config);

// Reads a JSON config file ({"socket": ..., "state_dir": ..., "max_concurrent": ..., ...}); unknown keys
// and bad values throw std::invalid_argument naming the key.
void load_config_file(const std::string& path, DaemonConfig& config);

}  // namespace capsule::daemon

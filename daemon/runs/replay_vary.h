// Replay variations for flakiness runs (POST /v1/runs/{id}/replay "vary"): fewer CPUs, tighter memory, and the
// reversed test order, each written into the replay's spec so its record says exactly what ran.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sandbox/spec.h"
#include "spec/run_spec.h"

namespace capsule::daemon {

struct ReplayVary {
  bool cpus = false;
  bool memory = false;
  bool order = false;
  bool any() const { return cpus || memory || order; }
};

// {"cpus": bool, "memory": bool, "order": bool}, each optional. Throws 400 invalid_request naming "vary.<field>".
ReplayVary parse_replay_vary(const nlohmann::json& body);

// Changes `spec` as the variation says and returns the names applied ("cpus", "memory", "order"):
// - cpus: half the original's limit (the machine's CPU count when it had none), never below 0.5 (or the
//   original's own limit when that was lower);
// - memory: 3/4 of the original's limit, never below 1.1 x the original run's peak (`peak_memory_bytes`, 0 when
//   unknown) nor 4 MiB; an original without a limit gets 2 x its peak (nothing when the peak is unknown);
// - order: MAVEN_OPTS gains -Dsurefire.runOrder=reversealphabetical (Surefire runs test classes in reverse
//   order), PYTEST_ADDOPTS gains "-p capsule_reverse_order" with kTestOrderDir first on PYTHONPATH (pytest runs
//   the collected items in reverse); the daemon mounts that plugin read-only when PYTEST_ADDOPTS names it.
std::vector<std::string> apply_replay_vary(spec::RunSpec& spec, const ReplayVary& vary,
                                           std::uint64_t peak_memory_bytes);

// Where the pytest plugin is inside the sandbox, and its module name.
inline constexpr const char* kTestOrderDir = "/opt/capsule-test-order";
inline constexpr const char* kTestOrderPlugin = "capsule_reverse_order";

// True when the run's PYTEST_ADDOPTS loads the reverse-order plugin.
bool uses_test_order_plugin(const spec::RunSpec& spec);
// Writes the plugin (once) under <cache_dir>/test-order and returns the read-only bind of it at kTestOrderDir.
sandbox::BindMount test_order_plugin_mount(const std::string& cache_dir);

}  // namespace capsule::daemon

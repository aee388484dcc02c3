// The limits of a run in ONE vocabulary: sandbox::Limits is the one struct, and the field table in limits.cpp
// names each limit once for requests, stored specs, the daemon's config and the CLI (durations in ms, sizes in bytes).
#pragma once

#include <bitset>
#include <nlohmann/json.hpp>
#include <string>

#include "sandbox/spec.h"

namespace capsule::spec {

using Limits = sandbox::Limits;

// The limits a JSON "limits" object names: their values, and which were given.
struct LimitValues {
  static constexpr std::size_t kFields = 10;
  Limits values;
  std::bitset<kFields> given;
};

// Daemon-wide defaults (what a run gets for a limit it does not name, or names as 0) and ceilings (0: none).
struct LimitPolicy {
  Limits defaults;
  Limits maxima;
};
LimitPolicy default_limit_policy();

// Every table field 0 (unlimited); the launcher-only fields (nofile, stack, ...) keep their defaults.
Limits unlimited_limits();

// Reads a "limits" object: {"wall_time": 600000 | "10m", "memory": 4294967296 | "4g", "pids", "cpus", ...}.
// `where` prefixes field names in errors. Throws 400 invalid_spec naming the field.
LimitValues parse_limit_values(const nlohmann::json& object, const std::string& where);
// Sets the given fields of `values` on `limits` (the daemon's config: default_limits / max_limits).
void overlay(Limits& limits, const LimitValues& values);
// What a run gets: each field as requested (0 or absent: the default), clamped to the maximum.
Limits apply_policy(const LimitValues& requested, const LimitPolicy& policy);
// Every table field as an integer (ms, bytes, count; cpus a number): parse_limit_values reads it back exactly.
nlohmann::json limits_to_json(const Limits& limits);

}  // namespace capsule::spec

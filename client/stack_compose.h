// The file of `capsule stack up` -> the POST /v1/stacks body: JSON as is, or the compose.yaml subset a stack can
// honour mapped onto the API's own fields (docs/stacks.md), so a compose file and the API cannot mean two things.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace capsule::client {

inline constexpr std::size_t kMaxStackFileBytes = 1u << 20;  // a stack file larger than this is refused
inline constexpr std::size_t kMaxComposeNodes = 100000;      // YAML nodes visited, aliases expanded
inline constexpr int kMaxComposeDepth = 64;                  // nesting of maps and lists (merge keys included)

// A compose.yaml of the subset -> the body. Top level: `services` (required), `name` and `version` (ignored),
// `x-capsule` ({stages, ttl, labels, network}, passed through), other `x-*` keys ignored (anchors live there).
// Per service: image, command (list: argv; string: /bin/sh -c), environment (map or KEY=VALUE list) -> env,
// working_dir -> cwd, user, depends_on (list, or map of {condition}), healthcheck -> ready {exec, interval,
// timeout, retries, start_period, start_interval, deadline = start_period + (retries + 1) * (interval + timeout)},
// ports and expose -> publish (127.0.0.1 of the host; expose: a free port), mem_limit -> limits.memory, labels,
// stop_grace_period -> stop_grace, `x-capsule` (its keys replace the service's: workspace, limits (keeping
// mem_limit's memory), ready, ...). YAML merge keys (<<) are applied; `$$` is a literal `$`, and variables ($X, ${X}) are refused (no
// environment is read). Anything else throws std::invalid_argument "compose: <key path>: <why>"; so do malformed
// YAML, a text over kMaxStackFileBytes and a document over kMaxComposeNodes or kMaxComposeDepth.
nlohmann::json compose_to_stack_body(std::string_view yaml);

// What `capsule stack up FILE` submits: the text as JSON when `file_name` ends in ".json" or the text starts with
// '{' (after blanks), else as compose (above). Throws std::invalid_argument naming `file_name` and the problem.
nlohmann::json stack_body_from_text(const std::string& file_name, std::string_view text);

}  // namespace capsule::client

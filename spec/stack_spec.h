// StackSpec (POST /v1/stacks): services sharing one private network, their readiness probes and dependencies,
// and the ordered stages; parsed, validated and printed from one place, so a stored stack can be submitted again.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/limits.h"
#include "spec/session_spec.h"

namespace capsule::spec {

// When a dependent may start: compose's service_started, service_healthy, service_completed_successfully.
enum class DependsOn { kStarted, kReady, kCompleted };
const char* depends_on_name(DependsOn condition);

struct ReadyProbe {
  enum class Kind { kNone, kTcp, kHttp, kLog, kExec };
  Kind kind = Kind::kNone;   // kNone: ready once started
  std::uint16_t port = 0;    // tcp, http
  std::string path = "/";    // http
  int status = 200;          // http: the status that means ready
  std::string success;       // log: POSIX extended regex (no back-references) searched in each output line
  std::string failure;       // log: a line matching it fails the service (readiness_failed)
  std::vector<std::string> argv;  // exec: exit 0 means ready
  std::chrono::milliseconds interval{100};    // from the end of one attempt to the start of the next
  std::chrono::milliseconds deadline{60000};  // from the command's start
  // One attempt's own time (compose's healthcheck.timeout): an exec probe still running then is killed and
  // counts as failed. 0: compose's default, 30s for exec; tcp and http, made on the stack's thread,
  // 5 x interval within 200ms..5s.
  std::chrono::milliseconds timeout{0};
  // Compose's retries and start_period: failed attempts within start_period (from the command's start) do not
  // count; `retries` failed attempts in a row after it fail the service (0: none do; only the deadline ends it).
  std::uint32_t retries = 0;
  std::chrono::milliseconds start_period{0};
  std::chrono::milliseconds start_interval{0};  // the interval within start_period; 0: `interval`

  // The attempt's time limit as the stack's thread uses it (timeout, or its default for the kind).
  std::chrono::milliseconds attempt_timeout() const;
};

// A service port reachable from the host's loopback (capsuled relays it): 127.0.0.1:host_port -> port.
struct PublishedPort {
  std::uint16_t port = 0;       // inside the stack
  std::uint16_t host_port = 0;  // on the host's 127.0.0.1; 0: a free one, shown in the stack object
};

struct ServiceSpec {
  // The box: image / toolchains / layers, as_of, env, cwd, workspace, limits, policy, labels, protect.
  SessionSpec box;
  std::vector<std::string> command;  // empty: a tool service, ready once its box is up
  std::string user;                  // who the command and stage execs run as (json_fields.h); "": the image's
  std::map<std::string, DependsOn> depends_on;
  ReadyProbe ready;
  std::vector<PublishedPort> publish;  // nothing of a stack listens on the host unless it is listed here
  // How long the command has, after SIGTERM, to end when the stack ends (compose's stop_grace_period) before it is
  // killed; 0: the session's limits.kill_grace. At most the daemon's max kill_grace.
  std::chrono::milliseconds stop_grace{0};
};

struct StageSpec {
  std::string name;
  bool deploy = false;              // the stage that starts the commands (name "deploy")
  std::chrono::milliseconds deadline{0};  // deploy: all services ready within it; 0: each probe's own deadline
  std::string service;              // an exec stage: which service's box it runs in
  ExecSpec exec;                    // its argv, env, cwd and timeout (0: the service's wall-time limit), parsed
                                    // as a session exec's are
  std::vector<std::string> junit;   // report globs read from the box after the exec (relative: from /workspace)
};

struct StackSpec {
  std::map<std::string, ServiceSpec> services;  // by name, a DNS label; the order of start comes from depends_on
  std::string egress = "none";                  // "none", or "proxy": the package proxy only, as of `as_of`
  std::optional<std::string> as_of;             // egress proxy: the cutoff date (a service's own as_of wins)
  std::vector<StageSpec> stages;                // exactly one deploy stage (added last when absent)
  std::chrono::milliseconds ttl{0};
  std::map<std::string, std::string> labels;

  // Service names in an order where each comes after what it depends on (ties by name).
  std::vector<std::string> start_order() const;
};

constexpr std::size_t kMaxStackServices = 16;
constexpr std::size_t kMaxStackStages = 32;
constexpr std::size_t kMaxProbePattern = 512;
constexpr std::size_t kMaxPublishedPorts = 8;  // per service
constexpr std::size_t kMaxReportPaths = 32;
constexpr std::uint32_t kMaxProbeRetries = 100000;
constexpr std::chrono::milliseconds kMaxSocketProbeTimeout{30000};  // a tcp or http attempt's timeout    // a stage's junit paths (64 MiB of reports in all)

// A log probe's pattern compiled as the stack's thread will use it (regcomp, REG_EXTENDED): "" when it
// compiles, else regerror's text.
std::string check_log_pattern(const std::string& pattern);

// Throws http::ApiError("invalid_spec", "<field>: <problem>"), unknown fields, cycles and unknown names included.
StackSpec parse_stack_spec(const nlohmann::json& body, const LimitPolicy& policy);
// parse_stack_spec(to_json(spec), policy) == spec under the same policy.
nlohmann::json to_json(const StackSpec& spec);

}  // namespace capsule::spec

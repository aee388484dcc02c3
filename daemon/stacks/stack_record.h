// StackRecord: what capsuled knows of one stack (per-service state, stages, the first failure with its reason),
// printed as the API's stack object and kept as one JSON file per stack, so a restart finds and ends it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace capsule::daemon {

// The fixed taxonomy of why a stack failed (docs/stacks.md).
namespace stack_reason {
inline constexpr const char* kSetupFailed = "setup_failed";
inline constexpr const char* kBuildFailed = "build_failed";
inline constexpr const char* kDeployTimeout = "deploy_timeout";
inline constexpr const char* kConnectionRefused = "connection_refused";
inline constexpr const char* kContainerExit = "container_exit";
inline constexpr const char* kReadinessFailed = "readiness_failed";
inline constexpr const char* kTestFailed = "test_failed";
inline constexpr const char* kStageTimeout = "stage_timeout";
inline constexpr const char* kCancelled = "cancelled";
inline constexpr const char* kMissingArtifact = "missing_artifact";
}  // namespace stack_reason

struct ServiceStatus {
  std::string state = "pending";  // pending | starting | started | ready | exited | failed | stopped
  std::string session;            // its box: a session id
  std::string exec_id;            // its command: a run id (GET /v1/runs/{id}/logs)
  std::optional<std::int64_t> ready_ms;  // from the command's start
  std::optional<int> exit_code;
  std::string probe;              // the last probe's outcome
  std::map<std::uint16_t, std::uint16_t> published;  // port inside -> host port on 127.0.0.1, while live
  nlohmann::json usage;           // its box's {cpu_ms, peak_memory_bytes}: live from its session, kept at the end
};

struct StageStatus {
  std::string name;
  std::string state = "pending";  // pending | running | passed | failed | skipped
  std::int64_t started_ms = 0;
  std::int64_t wall_ms = 0;
  std::string exec_id;
  std::optional<int> exit_code;
  nlohmann::json tests;           // null, or the JUnit counts and cases of its reports
};

struct StackFailure {
  std::string stage, reason, service, message;
};

struct StackRecord {
  std::string id;
  std::string state = "starting";  // starting | up | failed | deleted | expired | lost
  std::int64_t created_ms = 0;
  std::int64_t ended_ms = 0;
  std::string ended_reason;
  uid_t peer_uid = 0;
  pid_t peer_pid = 0;
  nlohmann::json spec;             // spec::to_json(StackSpec): submittable as is
  std::vector<std::string> hosts;  // the names in its /etc/hosts
  std::optional<StackFailure> failure;
  std::vector<StageStatus> stages;
  std::map<std::string, ServiceStatus> services;

  bool ended() const { return state == "deleted" || state == "expired" || state == "lost"; }
  nlohmann::json to_json() const;
  // Throws nlohmann::json::exception for a record that is not one.
  static StackRecord from_json(const nlohmann::json& j);
};

// dir/<id>.json, written to a temporary name and renamed (a crash leaves the old record or the new one).
void save_stack_record(const std::string& dir, const StackRecord& record);
// Every record in dir; unreadable files are skipped with a warning.
std::vector<StackRecord> load_stack_records(const std::string& dir);

}  // namespace capsule::daemon

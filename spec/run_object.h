// RunObject: a run as the API shows it and the ledger stores it, each value once:
// {id, state, labels, peer, times, spec, pinned, result, tests, diff, proxy, classfiles, coverage, replay_of,
// replay_vary}; {spec, pinned} resubmit as is.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace capsule::spec {

struct RunObject {
  std::string id;
  std::string state;  // queued, running, then how it ended (succeeded, failed, timed_out, ...)
  nlohmann::json labels = nlohmann::json::object();
  uid_t peer_uid = 0;
  pid_t peer_pid = 0;
  std::int64_t created_ms = 0;  // Unix milliseconds
  std::optional<std::int64_t> started_ms;
  std::optional<std::int64_t> finished_ms;
  nlohmann::json spec;    // to_json(RunSpec): every default filled
  nlohmann::json pinned;  // to_json(Pinned)
  // Once finished: {"result": {...}, "tests"?, "diff"?, "proxy"?, "classfiles"?, "coverage"?, "collect_error"?,
  // "record_error"?}
  // (daemon/record/run_record.h builds it).
  std::optional<nlohmann::json> outcome;

  // {"id", "state", "labels", "peer": {"uid", "pid"}, "times": {"created", "started", "finished"}, "spec",
  // "pinned", "result", "tests", "diff", "proxy", "classfiles", "coverage"} with null where a value is absent,
  // and "collect_error" / "record_error" when the outcome has them.
  // "replay_of" (the original's id) and "replay_vary" (["cpus", "memory", "order"]) come from the labels the
  // daemon gives a replay (kReplayOfLabel, kReplayVaryLabel), null otherwise; "pinned"."dependencies" is the
  // finished run's proxy.served, once per URL.
  nlohmann::json to_json() const;
};

inline constexpr const char* kReplayOfLabel = "capsule.replay_of";
inline constexpr const char* kReplayVaryLabel = "capsule.replay_vary";  // comma-separated: cpus,memory,order

}  // namespace capsule::spec

// The finished run's outcome: {"result" (the sandbox's, without the status: that is the run's state), "tests",
// "diff", "proxy"}, kept under a hard size ceiling so nothing a sandbox produces can make the ledger refuse it.
#pragma once

#include <chrono>
#include <memory>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/logs/log_store.h"
#include "spec/run_spec.h"
#include "sandbox/result.h"

namespace capsule::daemon {

// Ceiling of a stored record (its JSON text). Far below SQLite's limits; the full output is in the logs.
constexpr std::size_t kMaxRecordBytes = 4u << 20;
// Ceiling of each of stdout.head, stdout.tail, stderr.head, stderr.tail as JSON text (escapes counted).
constexpr std::size_t kMaxStreamPartBytes = 512u << 10;

// What finishing reads besides the result: where the cow upper dir and the workspace are.
struct RecordSources {
  std::string upper_dir;  // the cow workspace's overlay upper directory ("" when there is none)
  std::string lower_dir;  // what the upper is a change of: a snapshot's tree ("": the workspace path)
  std::optional<nlohmann::json> proxy;  // the package proxy's record, for network "proxy" runs
  // For the collectors (junit, classfiles, coverage) together: one deadline for the whole record, so a
  // finisher thread is held at most this long by what the sandbox left.
  std::chrono::milliseconds collect_time{20000};
  // The closed logs' digests (LogWriter::digest), written as result.stdout/stderr "sha256" and "bytes".
  std::optional<StreamDigest> stdout_digest, stderr_digest;
  // spec.baseline's run object as the submitter could read it at submit (null: not read, the check fails).
  std::shared_ptr<const nlohmann::json> baseline_run;
};

// {"result": result_to_json(result, spec.tail_lines) without "status" (with the sources' stream digests), "diff" (cow workspaces), "tests"
// (collect.junit, with "state" and "compile_error"), "classfiles" (collect.classfiles), "coverage"
// (collect.coverage), "proxy", "test_config_changes" (cow workspaces, test_config.h), "protect_violations"
// (spec.protect_test_config; spec.protect on a cow workspace: protect_diff.h), "baseline" (spec.baseline, test_loss.h)}, with output parts bounded (bound_stream_parts) and the whole bounded
// (bound_record). A collector that fails leaves its cause in "collect_error" instead of its section; never
// throws for what the sandbox left.
nlohmann::json build_record(const spec::RunSpec& spec, const sandbox::Result& result, const RecordSources& sources);

// Cuts a result's stdout/stderr head (keeping its start) and tail (keeping its end) at character boundaries
// until each is at most `max_part_bytes` of JSON text; a stream that was cut gets "truncated": true. Its
// tail_lines lose their oldest lines until they are at most that size too (in one pass: each line is measured
// once).
void bound_stream_parts(nlohmann::json& result, std::size_t max_part_bytes = kMaxStreamPartBytes);

// Makes the record's JSON text at most `max_bytes`: first shortens the diff lists, the tests' cases
// ("cases_truncated": true) and lists, the classfiles' and coverage's lists (marking "truncated": true; totals
// stay), then drops the output parts, and as a last resort keeps only a
// summary result (reason, exit code, signal, termination, times) with "record_error" saying why.
nlohmann::json bound_record(nlohmann::json record, std::size_t max_bytes = kMaxRecordBytes);

// Size of value.dump() with invalid UTF-8 replaced (as the ledger stores it).
std::size_t json_size(const nlohmann::json& value);

// The outcome of a run whose finishing failed (its state is internal_error): {"result": {"reason", ...}}.
nlohmann::json failure_record(const std::string& reason, const sandbox::Result& result);

}  // namespace capsule::daemon

// How two finished runs differ (GET /v1/runs/diff, `capsule runs diff`): verdict, status, exit code, test cases
// that changed outcome, stdout/stderr digests, dependency set, workspace changes, pins and timings.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

namespace capsule::daemon {

struct RunDiffLimits {
  std::size_t max_listed = 1000;  // entries in each list (tests changed/added/removed, dependencies, files)
};

// Compares run objects `a` and `b` (as GET /v1/runs/{id} returns them; records of any age):
// {"a", "b" (ids), "same_verdict", "verdict": {a, b} ("passed"/"failed", run_verdict.h), "status": {a, b},
//  "exit_code": {a, b}, "signal": {a, b},
//  "tests": {"a", "b" (counts: total, failed, errors, skipped; null without tests), "changed": [{name, a, b}]
//            (cases in both runs whose outcome differs), "added": [{name, outcome}] (only in b), "removed" (only
//            in a), "truncated" (a record's case list was cut, or a list here hit max_listed)},
//  "stdout", "stderr": {"same" (null unless both records have a sha256), "a", "b" (sha256 or null)},
//  "dependencies": {"added": [url], "removed": [url], "changed": [{url, a, b}] (sha256), "truncated"}, from
//            pinned.dependencies when a run has them, else proxy.served,
//  "files": null unless both runs have a workspace diff, else {"changed": [{path, a, b}] where a and b are
//            "added", "modified", "deleted" or null (not in that run's diff), listed when they differ or, same
//            change, when sizes or sha256 (where the records have them) differ; "truncated"},
//  "pinned": {field: {a, b}} for each pinned field (but dependencies) whose values differ,
//  "timings": {"wall_ms": {a, b}, "ratio": b/a (null when a's is 0 or missing)}}.
// Never throws for what the records hold.
nlohmann::json diff_runs(const nlohmann::json& a, const nlohmann::json& b, const RunDiffLimits& limits = {});

}  // namespace capsule::daemon

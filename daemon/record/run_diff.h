// How two finished runs differ (GET /v1/runs/diff, `capsule runs diff`): verdict, status, exit code, test cases
// that changed outcome, stdout/stderr digests, dependency set, workspace changes, pins and timings.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

namespace capsule::daemon {

struct RunDiffLimits {
  std::size_t max_listed = 1000;  // entries in each list (tests changed/added/removed, dependencies, files)
  bool allow_removed = false;     // lost tests are listed but do not fail the check (`--allow-removed`)
};

// Compares run objects `a` and `b` (as GET /v1/runs/{id} returns them; records of any age):
// {"a", "b" (ids), "same_verdict", "verdict": {a, b} ("passed"/"failed", run_verdict.h),
//  "check": {"verdict": "same" | "different" | "regressed", "reasons": [...], "allowed", "allow_removed",
//            "removed", "newly_skipped", "truncated"}: "regressed" when b lost test cases a had (reasons
//            "tests_removed", "tests_newly_skipped": loss_check, test_loss.h; not with allow_removed, which
//            moves them to "allowed"), else "different" when the verdicts differ (reason "verdict_differs"),
//            else "same"; `runs diff` exits 0 only for "same", "status": {a, b},
//  "exit_code": {a, b}, "signal": {a, b},
//  "tests": {"a", "b" (counts: total, failed, errors, skipped; null without tests), "changed": [{name, a, b}]
//            (cases in both runs whose outcome differs), "added": [{name, outcome}] (only in b), "removed" (only
//            in a), "newly_skipped": [{name, a}] (ran in a, skipped in b), "removed_count",
//            "newly_skipped_count" (in full), "truncated" (a record's case list was cut, or a list hit max_listed)},
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

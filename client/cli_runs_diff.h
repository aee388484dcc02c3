// `capsule runs diff A B [--json]` over GET /v1/runs/diff: a readable summary of how two finished runs differ,
// exiting like diff(1): 0 when the verdicts are the same and b lost no test, 1 when they differ or b lost
// tests (removed or newly skipped; not with --allow-removed), 2 on trouble.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace capsule::client {

inline constexpr int kExitVerdictsDiffer = 1;
inline constexpr int kExitDiffTrouble = 2;  // usage errors, unknown or unfinished runs, a daemon or connection error
extern const char* const kRunsDiffExitHelp;

// The summary of a GET /v1/runs/diff answer: verdict, status and exit code, test counts and the cases that
// changed, stdout/stderr digests, dependency and file changes, pins and timings; one item per line.
std::string format_run_diff(const nlohmann::json& diff);

// 0 when the answer's check.verdict is "same" (an older daemon's, without check: same_verdict), else
// kExitVerdictsDiffer.
int run_diff_exit_status(const nlohmann::json& diff);

// Prints the summary (or the API's JSON with `json`) and returns run_diff_exit_status; throws on errors
// (capsule_main exits kExitDiffTrouble then).
int cmd_runs_diff(const std::string& socket, const std::string& a, const std::string& b, bool json,
                  bool allow_removed = false);

}  // namespace capsule::client

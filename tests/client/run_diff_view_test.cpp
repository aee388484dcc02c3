// The `capsule runs diff` summary and exit status, on hand-written GET /v1/runs/diff answers.
#include <gtest/gtest.h>

#include "client/cli_runs_diff.h"

namespace capsule::client {
namespace {

using nlohmann::json;

const json kDiffering = json::parse(R"({
  "a": "r1", "b": "r2", "same_verdict": false, "verdict": {"a": "passed", "b": "failed"},
  "status": {"a": "succeeded", "b": "failed"}, "exit_code": {"a": 0, "b": 1}, "signal": {"a": 0, "b": 0},
  "tests": {"a": {"total": 2, "failed": 0, "errors": 0, "skipped": 0},
            "b": {"total": 2, "failed": 1, "errors": 0, "skipped": 0},
            "changed": [{"name": "pkg.T.flaky", "a": "passed", "b": "failed"}],
            "added": [{"name": "pkg.T.fresh", "outcome": "passed"}], "removed": [], "truncated": false},
  "stdout": {"same": false, "a": "sha256:aa", "b": "sha256:bb"},
  "stderr": {"same": null, "a": null, "b": "sha256:cc"},
  "dependencies": {"added": ["/x.whl"], "removed": [], "changed": [], "truncated": false},
  "files": {"changed": [{"path": "out.txt", "a": "added", "b": null}], "truncated": false},
  "pinned": {"kernel": {"a": "6.1", "b": "6.2"}},
  "timings": {"wall_ms": {"a": 100.0, "b": 250.0}, "ratio": 2.5}})");

TEST(RunDiffView, SummarySaysWhatDiffers) {
  const std::string text = format_run_diff(kDiffering);
  for (const char* expected : {"verdict: DIFFERENT: passed -> failed", "status: succeeded -> failed; exit code: 0 -> 1",
                               "changed  pkg.T.flaky: passed -> failed", "only b   pkg.T.fresh: passed",
                               "stdout: different", "stderr: unknown", "only b   /x.whl", "out.txt: added -> (none)",
                               "kernel: 6.1 -> 6.2", "wall time: 100 ms -> 250 ms (x2.50)"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << " in:\n" << text;
  }
  EXPECT_EQ(run_diff_exit_status(kDiffering), kExitVerdictsDiffer);
}

TEST(RunDiffView, SameVerdictExitsZeroAndMissingSectionsStillPrint) {
  const json same = {{"a", "r1"}, {"b", "r2"}, {"same_verdict", true}, {"verdict", {{"a", "failed"}, {"b", "failed"}}},
                     {"files", nullptr}};
  const std::string text = format_run_diff(same);
  EXPECT_NE(text.find("verdict: same (failed)"), std::string::npos) << text;
  EXPECT_NE(text.find("files: not compared"), std::string::npos) << text;
  EXPECT_NE(text.find("tests: a: no tests collected"), std::string::npos) << text;
  EXPECT_EQ(run_diff_exit_status(same), 0);
}

TEST(RunDiffView, LostTestsRegressAndExitOneUnlessAllowed) {
  json lost = {{"a", "r1"}, {"b", "r2"}, {"same_verdict", true}, {"verdict", {{"a", "passed"}, {"b", "passed"}}},
               {"check", json::parse(R"({"verdict": "regressed", "reasons": ["tests_removed", "tests_newly_skipped"],
                                         "allowed": [], "removed": {"count": 202}, "newly_skipped": {"count": 1}})")},
               {"tests", json::parse(R"({"newly_skipped": [{"name": "pkg.T.x", "a": "passed"}]})")}};
  std::string text = format_run_diff(lost);
  EXPECT_NE(text.find("verdict: REGRESSED (tests_removed, tests_newly_skipped): 202 removed, 1 newly skipped"),
            std::string::npos) << text;
  EXPECT_NE(text.find("skipped  pkg.T.x: passed -> skipped"), std::string::npos) << text;
  EXPECT_EQ(run_diff_exit_status(lost), kExitVerdictsDiffer);

  lost["check"]["verdict"] = "same";
  lost["check"]["allowed"] = lost["check"]["reasons"];
  lost["check"]["reasons"] = json::array();
  text = format_run_diff(lost);
  EXPECT_NE(text.find("verdict: same (passed); allowed: tests_removed, tests_newly_skipped: 202 removed"),
            std::string::npos) << text;
  EXPECT_EQ(run_diff_exit_status(lost), 0);
}

}  // namespace
}  // namespace capsule::client

// `capsule replay`: the request body from its flags, and the flakiness report printed from a canned answer of
// GET /v1/runs/flakiness (the endpoint's contract).
#include <gtest/gtest.h>

#include "client/cli_replay.h"

namespace capsule::client {
namespace {

using nlohmann::json;

TEST(ReplayBody, RepeatWaitsAndVaryNamesBecomeFlags) {
  EXPECT_EQ(build_replay_body({"r1", std::nullopt, "", false, ""}), json::object());
  EXPECT_EQ(build_replay_body({"r1", 3, "cpus,order", false, ""}),
            json({{"repeat", 3}, {"vary", {{"cpus", true}, {"order", true}}}, {"wait", true}}));
  EXPECT_THROW(build_replay_body({"r1", 3, "cpus,disk", false, ""}), std::invalid_argument);
  const std::string digest = "sha256:" + std::string(64, 'a');
  EXPECT_EQ(build_replay_body({"r1", std::nullopt, "", false, digest}), json({{"workspace", {{"snapshot", digest}}}}));
  EXPECT_EQ(build_replay_body({"r1", std::nullopt, "", false, "/audit/../audit/tree"}),
            json({{"workspace", {{"path", "/audit/tree"}}}}));
}

TEST(FlakinessReport, ShowsTheVerdictEachCaseAndTheFlakyOnes) {
  const json report = json::parse(R"({"runs": 4, "verdict": {"passed": 3, "failed": 1, "flip_rate": 0.25},
    "cases": [{"name": "demo.Test.a", "passed": 4, "failed": 0, "skipped": 0, "flip_rate": 0},
              {"name": "demo.Test.b", "passed": 3, "failed": 1, "skipped": 0, "flip_rate": 0.25}],
    "flaky": ["demo.Test.b"]})");
  EXPECT_EQ(format_flakiness_report(report),
            "flakiness over 4 runs: verdict passed 3, failed 1, flip rate 0.25\n"
            "CASE          PASSED   FAILED   SKIPPED   FLIP RATE\n"
            "demo.Test.a   4        0        0         0.00\n"
            "demo.Test.b   3        1        0         0.25\n"
            "flaky: demo.Test.b\n");
  EXPECT_EQ(format_flakiness_report(json::parse(R"({"runs": 2, "verdict": {"passed": 2, "failed": 0, "flip_rate": 0},
    "cases": [], "flaky": []})")),
            "flakiness over 2 runs: verdict passed 2, failed 0, flip rate 0.00\nno flaky test cases\n");
}

}  // namespace
}  // namespace capsule::client

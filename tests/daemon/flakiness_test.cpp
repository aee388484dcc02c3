// FlakinessTally on hand-written run objects: the documented flip rate for a case failing one run in three,
// error counting as failed, skips, runs without tests, and the cap on case names.
#include "daemon/record/flakiness.h"

#include <gtest/gtest.h>

namespace capsule::daemon {
namespace {

using nlohmann::json;

json run_with(const std::string& flaky_outcome) {
  const bool failed = flaky_outcome != "passed";
  return {{"state", failed ? "failed" : "succeeded"},
          {"result", {{"exit_code", failed ? 1 : 0}}},
          {"tests", {{"failed", flaky_outcome == "failed" ? 1 : 0}, {"errors", flaky_outcome == "error" ? 1 : 0},
                     {"cases", {{{"class", "pkg.T"}, {"name", "flaky"}, {"outcome", flaky_outcome}},
                                {{"class", "pkg.T"}, {"name", "steady"}, {"outcome", "passed"}},
                                {{"class", "pkg.T"}, {"name", "off"}, {"outcome", "skipped"}}}}}}};
}

TEST(Flakiness, FlipRateIsTheMinorityShare) {
  EXPECT_DOUBLE_EQ(flip_rate(2, 1), 1.0 / 3);
  EXPECT_DOUBLE_EQ(flip_rate(1, 2), 1.0 / 3);
  EXPECT_DOUBLE_EQ(flip_rate(5, 5), 0.5);
  EXPECT_EQ(flip_rate(3, 0), 0.0);
  EXPECT_EQ(flip_rate(0, 0), 0.0);
}

TEST(Flakiness, ACaseFailingOneRunInThree) {
  FlakinessTally tally;
  tally.add(run_with("passed"));
  tally.add(run_with("failed"));
  tally.add(run_with("passed"));
  const json report = tally.to_json();
  EXPECT_EQ(report["runs"], 3);
  EXPECT_EQ(report["verdict"]["passed"], 2);
  EXPECT_EQ(report["verdict"]["failed"], 1);
  EXPECT_DOUBLE_EQ(report["verdict"]["flip_rate"].get<double>(), 1.0 / 3);
  ASSERT_EQ(report["cases"].size(), 3u);
  const json& flaky = report["cases"][0];  // sorted by name
  EXPECT_EQ(flaky["name"], "pkg.T.flaky");
  EXPECT_EQ(flaky["passed"], 2);
  EXPECT_EQ(flaky["failed"], 1);
  EXPECT_DOUBLE_EQ(flaky["flip_rate"].get<double>(), 1.0 / 3);
  EXPECT_EQ(report["cases"][1], json::parse(R"({"name": "pkg.T.off", "passed": 0, "failed": 0, "skipped": 3,
                                                "flip_rate": 0.0})"));
  EXPECT_EQ(report["cases"][2]["flip_rate"], 0.0);
  EXPECT_EQ(report["flaky"], json({"pkg.T.flaky"}));
  EXPECT_FALSE(report.contains("cases_truncated"));
}

TEST(Flakiness, ErrorCountsAsFailedAndRunsWithoutTestsCountForTheVerdictOnly) {
  FlakinessTally tally;
  tally.add(run_with("error"));
  tally.add(run_with("passed"));
  tally.add({{"state", "succeeded"}, {"result", {{"exit_code", 0}}}});  // an old record: no tests section
  tally.add(json());                                                    // nothing usable: a failed verdict
  const json report = tally.to_json();
  EXPECT_EQ(report["runs"], 4);
  EXPECT_EQ(report["verdict"]["passed"], 2);
  EXPECT_EQ(report["verdict"]["failed"], 2);
  EXPECT_EQ(report["cases"][0]["failed"], 1);
  EXPECT_EQ(report["cases"][0]["passed"], 1);
  EXPECT_EQ(report["flaky"], json({"pkg.T.flaky"}));
}

TEST(Flakiness, CaseNamesPastTheCapAreLeftOutAndSaidSo) {
  FlakinessTally tally(2);
  tally.add(run_with("passed"));
  tally.add(run_with("failed"));
  const json report = tally.to_json();
  EXPECT_EQ(report["cases"].size(), 2u);
  EXPECT_EQ(report["cases_truncated"], true);
}

}  // namespace
}  // namespace capsule::daemon

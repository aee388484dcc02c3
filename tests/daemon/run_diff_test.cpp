// diff_runs on hand-written run objects: verdicts, changed/added/removed cases, stream digests (and records
// without them), the dependency set from pinned or proxy, workspace changes, pins, timings and bounded lists.
#include "daemon/record/run_diff.h"
#include "daemon/record/test_loss.h"

#include <gtest/gtest.h>

namespace capsule::daemon {
namespace {

using nlohmann::json;

json test_case(const std::string& class_name, const std::string& name, const std::string& outcome) {
  return {{"class", class_name}, {"name", name}, {"outcome", outcome}, {"time", nullptr}};
}

json run(const std::string& id, const std::string& state, int exit_code, json cases) {
  std::uint64_t failed = 0;
  for (const json& c : cases) failed += c["outcome"] == "failed" ? 1 : 0;
  return {{"id", id},
          {"state", state},
          {"pinned", {{"image_digests", {"sha256:img"}}, {"policy_sha256", "sha256:pol"}, {"cutoff", nullptr}}},
          {"result",
           {{"exit_code", exit_code}, {"signal", 0}, {"wall_ms", 100.0},
            {"stdout", {{"bytes", 3}, {"sha256", "sha256:out-" + id}}},
            {"stderr", {{"bytes", 0}, {"sha256", "sha256:empty"}}}}},
          {"tests", {{"total", cases.size()}, {"failed", failed}, {"errors", 0}, {"skipped", 0}, {"cases", cases},
                     {"cases_truncated", false}}},
          {"diff", nullptr},
          {"proxy", nullptr}};
}

TEST(RunDiff, ChangedAddedAndRemovedCasesAndTheVerdict) {
  const json a = run("a", "succeeded", 0, {test_case("C", "x", "passed"), test_case("C", "y", "passed"),
                                           test_case("C", "gone", "passed")});
  const json b = run("b", "failed", 1, {test_case("C", "x", "passed"), test_case("C", "y", "failed"),
                                        test_case("", "fresh", "skipped")});
  const json d = diff_runs(a, b);
  EXPECT_EQ(d["a"], "a");
  EXPECT_EQ(d["same_verdict"], false);
  EXPECT_EQ(d["verdict"], json({{"a", "passed"}, {"b", "failed"}}));
  EXPECT_EQ(d["status"], json({{"a", "succeeded"}, {"b", "failed"}}));
  EXPECT_EQ(d["exit_code"], json({{"a", 0}, {"b", 1}}));
  EXPECT_EQ(d["tests"]["changed"], json::parse(R"([{"name": "C.y", "a": "passed", "b": "failed"}])"));
  EXPECT_EQ(d["tests"]["removed"], json::parse(R"([{"name": "C.gone", "outcome": "passed"}])"));
  EXPECT_EQ(d["tests"]["added"], json::parse(R"([{"name": "fresh", "outcome": "skipped"}])"));
  EXPECT_EQ(d["tests"]["a"]["failed"], 0);
  EXPECT_EQ(d["tests"]["b"]["failed"], 1);
  EXPECT_EQ(d["tests"]["truncated"], false);
  EXPECT_EQ(d["stdout"], json({{"same", false}, {"a", "sha256:out-a"}, {"b", "sha256:out-b"}}));
  EXPECT_EQ(d["stderr"]["same"], true);
  EXPECT_EQ(d["pinned"], json::object()) << "same pins";
  EXPECT_EQ(d["timings"]["ratio"], 1.0);
  EXPECT_EQ(d["files"], nullptr) << "neither run had a workspace diff";
}

TEST(RunDiff, SucceededWithFailedTestsIsNotAPass) {
  const json a = run("a", "succeeded", 0, {test_case("C", "x", "failed")});
  const json b = run("b", "failed", 3, {});
  EXPECT_EQ(diff_runs(a, b)["same_verdict"], true) << "both failed";
}

TEST(RunDiff, ListsAreBoundedAndACutCaseListSaysSo) {
  json cases_a = json::array(), cases_b = json::array();
  for (int i = 0; i < 10; ++i) {
    cases_a.push_back(test_case("C", "t" + std::to_string(i), "passed"));
    cases_b.push_back(test_case("C", "t" + std::to_string(i), "error"));
  }
  json a = run("a", "succeeded", 0, cases_a);
  const json b = run("b", "succeeded", 0, cases_b);
  const json d = diff_runs(a, b, RunDiffLimits{4});
  EXPECT_EQ(d["tests"]["changed"].size(), 4u);
  EXPECT_EQ(d["tests"]["truncated"], true);

  a["tests"]["cases"] = json::array({test_case("C", "t0", "passed")});
  a["tests"]["cases_truncated"] = true;
  const json cut = diff_runs(a, a);
  EXPECT_EQ(cut["tests"]["changed"], json::array());
  EXPECT_EQ(cut["tests"]["truncated"], true) << "the record's own list was cut";
}

TEST(RunDiff, OldRecordsWithoutDigestsOrSectionsCompareAsUnknown) {
  json old = {{"id", "old"}, {"state", "succeeded"}, {"result", {{"exit_code", 0}, {"stdout", {{"bytes", 3}}}}}};
  const json now = run("now", "succeeded", 0, {test_case("C", "x", "passed")});
  const json d = diff_runs(old, now);
  EXPECT_EQ(d["stdout"]["same"], nullptr) << d.dump();
  EXPECT_EQ(d["stdout"]["a"], nullptr);
  EXPECT_EQ(d["stdout"]["b"], "sha256:out-now");
  EXPECT_EQ(d["tests"]["a"], nullptr);
  EXPECT_EQ(d["tests"]["added"].size(), 1u);
  EXPECT_EQ(d["timings"]["ratio"], nullptr) << "no wall time in the old record";
  EXPECT_EQ(d["same_verdict"], true);
  EXPECT_TRUE(diff_runs(json(), json::array()).is_object()) << "not even objects: still an answer";
}

TEST(RunDiff, DependenciesComeFromPinnedElseFromWhatTheProxyServed) {
  json a = run("a", "succeeded", 0, {});
  json b = run("b", "succeeded", 0, {});
  a["proxy"] = {{"served", {{{"url", "/x-1.0.whl"}, {"sha256", "s1"}}, {{"url", "/gone.whl"}, {"sha256", "s2"}}}}};
  b["proxy"] = {{"served", {{{"url", "/x-1.0.whl"}, {"sha256", "other"}}, {{"url", "/new.whl"}, {"sha256", "s3"}}}}};
  json d = diff_runs(a, b)["dependencies"];
  EXPECT_EQ(d["added"], json({"/new.whl"}));
  EXPECT_EQ(d["removed"], json({"/gone.whl"}));
  EXPECT_EQ(d["changed"], json::parse(R"([{"url": "/x-1.0.whl", "a": "s1", "b": "other"}])"));

  b["pinned"]["dependencies"] = a["proxy"]["served"];  // the pinned set wins over what b's proxy served
  d = diff_runs(a, b)["dependencies"];
  EXPECT_EQ(d["added"], json::array());
  EXPECT_EQ(d["changed"], json::array());
  EXPECT_EQ(diff_runs(a, b)["pinned"], json::object()) << "dependencies are not repeated as a pin";
}

TEST(RunDiff, FilesChangedInOneRunOnlyOrWithOtherContent) {
  json a = run("a", "succeeded", 0, {});
  json b = run("b", "succeeded", 0, {});
  a["diff"] = {{"added", {{{"path", "out/a.txt"}, {"size", 1}}, {{"path", "same.txt"}, {"size", 2}}}},
               {"modified", {{{"path", "src/m.py"}, {"size", 10}}, {{"path", "d.bin"}, {"size", 4}, {"sha256", "x"}}}},
               {"deleted", json::array()},
               {"truncated", false}};
  b["diff"] = {{"added", {{{"path", "same.txt"}, {"size", 2}}}},
               {"modified", {{{"path", "src/m.py"}, {"size", 12}}, {{"path", "d.bin"}, {"size", 4}, {"sha256", "y"}}}},
               {"deleted", {{{"path", "old.txt"}, {"size", 3}}}},
               {"truncated", false}};
  const json d = diff_runs(a, b)["files"];
  EXPECT_EQ(d["changed"], json::parse(R"([
    {"path": "d.bin", "a": "modified", "b": "modified"},
    {"path": "old.txt", "a": null, "b": "deleted"},
    {"path": "out/a.txt", "a": "added", "b": null},
    {"path": "src/m.py", "a": "modified", "b": "modified"}])"));
  EXPECT_EQ(d["truncated"], false);
}

TEST(RunDiff, PinsThatDifferAreListedWithBothValues) {
  json a = run("a", "succeeded", 0, {});
  json b = run("b", "succeeded", 0, {});
  b["pinned"]["image_digests"] = {"sha256:other"};
  b["pinned"]["kernel"] = "6.1.0";
  b["result"]["wall_ms"] = 250.0;
  const json d = diff_runs(a, b);
  EXPECT_EQ(d["pinned"]["image_digests"], json({{"a", {"sha256:img"}}, {"b", {"sha256:other"}}}));
  EXPECT_EQ(d["pinned"]["kernel"], json({{"a", nullptr}, {"b", "6.1.0"}}));
  EXPECT_EQ(d["pinned"].size(), 2u);
  EXPECT_DOUBLE_EQ(d["timings"]["ratio"].get<double>(), 2.5);
}

// The run of issue 35: b dropped cases by an exclude and skipped others, yet both runs "passed".
TEST(RunDiff, RemovedOrNewlySkippedCasesRegressEvenWhenBothPassed) {
  json cases_a = json::array(), cases_b = json::array();
  for (int i = 0; i < 6; ++i) cases_a.push_back(test_case("C", "t" + std::to_string(i), "passed"));
  cases_b = {test_case("C", "t0", "passed"), test_case("C", "t1", "skipped"), test_case("C", "t2", "skipped")};
  const json a = run("a", "succeeded", 0, cases_a);
  const json b = run("b", "succeeded", 0, cases_b);
  const json d = diff_runs(a, b);
  EXPECT_EQ(d["same_verdict"], true) << "the verdicts alone look the same";
  EXPECT_EQ(d["check"]["verdict"], "regressed") << d["check"];
  EXPECT_EQ(d["check"]["reasons"], json({"tests_removed", "tests_newly_skipped"}));
  EXPECT_EQ(d["check"]["removed"]["count"], 3);
  EXPECT_EQ(d["check"]["removed"]["fewer_total"], true);
  EXPECT_EQ(d["tests"]["removed_count"], 3);
  EXPECT_EQ(d["tests"]["removed"].size(), 3u);
  EXPECT_EQ(d["tests"]["newly_skipped"], json::parse(R"([{"name": "C.t1", "a": "passed"},
                                                           {"name": "C.t2", "a": "passed"}])"));
  EXPECT_EQ(d["tests"]["newly_skipped_count"], 2);

  RunDiffLimits allow;
  allow.allow_removed = true;
  const json allowed = diff_runs(a, b, allow);
  EXPECT_EQ(allowed["check"]["verdict"], "same") << allowed["check"];
  EXPECT_EQ(allowed["check"]["reasons"], json::array());
  EXPECT_EQ(allowed["check"]["allowed"], json({"tests_removed", "tests_newly_skipped"})) << "still said";
  EXPECT_EQ(allowed["tests"]["removed_count"], 3);

  EXPECT_EQ(diff_runs(a, a)["check"]["verdict"], "same");
  EXPECT_EQ(diff_runs(b, a)["check"]["verdict"], "same") << "more tests, none skipped anew: no loss";
  const json failed = run("f", "failed", 1, cases_a);
  EXPECT_EQ(diff_runs(a, failed)["check"]["verdict"], "different");
  EXPECT_EQ(diff_runs(a, failed)["check"]["reasons"], json({"verdict_differs"}));
  EXPECT_EQ(diff_runs(a, failed, allow)["check"]["verdict"], "different") << "allow_removed allows only losses";
}

TEST(RunDiff, FewerTestsInTotalRegressEvenWhenTheCaseListsWereCut) {
  json a = run("a", "succeeded", 0, {test_case("C", "t0", "passed")});
  json b = a;
  b["id"] = "b";
  a["tests"]["total"] = 334;
  a["tests"]["cases_truncated"] = true;
  b["tests"]["total"] = 132;
  b["tests"]["cases_truncated"] = true;
  const json d = diff_runs(a, b);
  EXPECT_EQ(d["check"]["verdict"], "regressed") << d["check"];
  EXPECT_EQ(d["check"]["reasons"], json({"tests_removed"}));
  EXPECT_EQ(d["check"]["removed"]["count"], 0) << "no name is known to be missing";
  EXPECT_EQ(d["check"]["truncated"], true);

  b.erase("tests");  // b collected no tests at all
  EXPECT_EQ(diff_runs(a, b)["check"]["verdict"], "regressed");
}

TEST(RunDiff, LostCaseListsAreBoundedButCountedInFull) {
  json cases_a = json::array();
  for (int i = 0; i < 10; ++i) cases_a.push_back(test_case("C", "t" + std::to_string(i), "passed"));
  const json a = run("a", "succeeded", 0, cases_a);
  const json b = run("b", "succeeded", 0, json::array());
  const json d = diff_runs(a, b, RunDiffLimits{4});
  EXPECT_EQ(d["check"]["removed"]["count"], 10);
  EXPECT_EQ(d["check"]["removed"]["cases"].size(), 4u);
  EXPECT_EQ(d["tests"]["removed_count"], 10);
  EXPECT_EQ(d["tests"]["truncated"], true);
}

// What a submission keeps of its baseline compares as the whole run object does; an unreadable one fails.
TEST(RunDiff, ABaselineCheckOnTheKeptViewOfTheBaseline) {
  const json a = run("a", "succeeded", 0, {test_case("C", "x", "passed"), test_case("C", "y", "passed")});
  const json b = run("b", "succeeded", 0, {test_case("C", "x", "skipped")});
  const json view = tests_view(a);
  EXPECT_FALSE(view.contains("result"));
  EXPECT_EQ(view["tests"]["cases"][0], json({{"class", "C"}, {"name", "x"}, {"outcome", "passed"}}));
  const json check = baseline_check("a", &view, b, false);
  EXPECT_EQ(check, baseline_check("a", &a, b, false));
  EXPECT_EQ(check["verdict"], "regressed");
  EXPECT_EQ(check["reasons"], json({"tests_removed", "tests_newly_skipped"}));
  EXPECT_EQ(check["run"], "a");
  EXPECT_EQ(baseline_check("a", &view, b, true)["verdict"], "passed");
  EXPECT_EQ(baseline_check("a", nullptr, b, true)["verdict"], "unchecked") << "allow_removed cannot allow that";
  json unchecked = b;
  unchecked["baseline"] = baseline_check("a", nullptr, b, false);
  EXPECT_EQ(diff_runs(a, unchecked)["verdict"]["b"], "failed");
}

TEST(RunDiff, ABaselineRegressionOrAProtectViolationFailsTheRunsVerdict) {
  json a = run("a", "succeeded", 0, {test_case("C", "x", "passed")});
  json b = a;
  b["baseline"] = {{"run", "r0"}, {"verdict", "regressed"}};
  EXPECT_EQ(diff_runs(a, b)["verdict"], json({{"a", "passed"}, {"b", "failed"}}));
  b["baseline"]["verdict"] = "passed";
  EXPECT_EQ(diff_runs(a, b)["same_verdict"], true);
  b["protect_violations"] = json::array({{{"path", "conftest.py"}, {"reason", "test configuration"}}});
  EXPECT_EQ(diff_runs(a, b)["verdict"]["b"], "failed");
  b["protect_violations"] = json::array();
  EXPECT_EQ(diff_runs(a, b)["verdict"]["b"], "passed");
}

}  // namespace
}  // namespace capsule::daemon

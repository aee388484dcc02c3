// The record's size ceiling: output parts cut at character boundaries by their JSON size, lists shortened
// before anything else, and a minimal record with the reason as the last resort.
#include "daemon/record/run_record.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "spec/limits.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

TEST(RunRecord, StreamPartsAreCutByTheirJsonSizeAtCharacterBoundaries) {
  json record = {{"stdout", {{"bytes", 5000}, {"truncated", false}, {"head", std::string(300, '\x01')},
                             {"tail", "\xC3\xA9" + std::string(100, 'x')}}},
                 {"stderr", {{"bytes", 2}, {"truncated", false}, {"head", "ok"}, {"tail", ""}}}};
  bound_stream_parts(record, 61);
  EXPECT_EQ(record["stdout"]["head"], std::string(10, '\x01')) << "6 JSON bytes each";
  EXPECT_LE(json_size(record["stdout"]["head"]), 61u + 2u);
  EXPECT_EQ(record["stdout"]["tail"], std::string(61, 'x')) << "never half a character";
  EXPECT_EQ(record["stdout"]["truncated"], true);
  EXPECT_EQ(record["stderr"]["head"], "ok");
  EXPECT_EQ(record["stderr"]["truncated"], false);

  json small = {{"stdout", {{"head", "\xC3\xA9\xC3\xA9"}, {"tail", ""}, {"truncated", false}}}};
  bound_stream_parts(small, 3);
  EXPECT_EQ(small["stdout"]["head"], "\xC3\xA9");
}

TEST(RunRecord, ListsAreShortenedFirstAndTotalsKept) {
  json added = json::array();
  for (int i = 0; i < 5000; ++i) added.push_back({{"path", "file-" + std::to_string(i)}, {"size", 1}});
  json record = {{"result", {{"stdout", {{"head", "hello"}, {"tail", ""}, {"truncated", false}}}}},
                 {"diff", {{"added", added}, {"modified", json::array()}, {"deleted", json::array()},
                           {"truncated", false}, {"totals", {{"added", 5000}}}}}};
  const json bounded = bound_record(record, 20000);
  EXPECT_LE(json_size(bounded), 20000u);
  EXPECT_EQ(bounded["diff"]["truncated"], true);
  EXPECT_EQ(bounded["diff"]["totals"]["added"], 5000);
  EXPECT_GT(bounded["diff"]["added"].size(), 0u);
  EXPECT_EQ(bounded["diff"]["added"][0]["path"], "file-0");
  EXPECT_EQ(bounded["result"]["stdout"]["head"], "hello") << "output parts stay while lists can give way";
  EXPECT_EQ(bound_record(record, 1 << 20), record) << "a record under the ceiling is untouched";
}

TEST(RunRecord, LastResortIsAMinimalRecordWithTheReason) {
  const json termination = {{"reason", "wall_time"}, {"sent", {"TERM", "KILL"}}, {"kill_after_ms", 5000}};
  json record = {{"result", {{"exit_code", 2}, {"wall_ms", 12.5}, {"reason", ""}, {"termination", termination}}},
                 {"proxy", {{"served", std::string(100000, 'i')}}}};
  const json bounded = bound_record(record, 1000);
  EXPECT_LE(json_size(bounded), 1000u);
  EXPECT_EQ(bounded["result"]["exit_code"], 2);
  EXPECT_EQ(bounded["result"]["termination"], termination);
  EXPECT_EQ(bounded["result"]["wall_ms"], 12.5);
  EXPECT_NE(bounded["record_error"].get<std::string>().find("exceeded the 1000-byte ceiling"), std::string::npos)
      << bounded;
  EXPECT_FALSE(bounded.contains("proxy"));
  EXPECT_NE(bounded["record_error"].get<std::string>().find("this run cannot be replayed"), std::string::npos)
      << "the lost dependency list is said, not silent: " << bounded;
}

TEST(RunRecord, TheLastResortKeepsTheProxysObjectsWhenTheyFit) {
  const json served = json::array({{{"url", "/pypi/x.whl"}, {"sha256", std::string(64, 'a')}, {"size", 3}}});
  json record = {{"result", {{"exit_code", 0}, {"wall_ms", 1.0}, {"reason", ""}}},
                 {"tests", {{"cases", std::string(100000, 'c')}}},
                 {"proxy", {{"served", served}}}};
  const json bounded = bound_record(record, 2000);
  EXPECT_LE(json_size(bounded), 2000u);
  EXPECT_EQ(bounded["proxy"]["served"], served) << "a replay needs them";
  EXPECT_FALSE(bounded.contains("tests"));
}

TEST(RunRecord, TailLinesLoseTheirOldestLinesToTheBound) {
  json record = {{"stdout", {{"head", ""}, {"tail", ""}, {"tail_lines", {"oldest line", "middle", "newest"}}}}};
  bound_stream_parts(record, 20);
  EXPECT_EQ(record["stdout"]["tail_lines"], json({"middle", "newest"}));
}

// Each line is measured once: 200k lines (the quadratic trim re-serialised ~2 MB per dropped line) keep exactly
// the newest lines that fit.
TEST(RunRecord, ManyTailLinesAreTrimmedToTheNewestThatFit) {
  json lines = json::array();
  for (int i = 0; i < 200000; ++i) lines.push_back("line " + std::to_string(100000 + i));  // 11 chars, 13 in JSON
  json record = {{"stdout", {{"head", ""}, {"tail", ""}, {"tail_lines", lines}}}};
  bound_stream_parts(record, 1000);
  const json& kept = record["stdout"]["tail_lines"];
  EXPECT_LE(json_size(kept), 1000u);
  EXPECT_EQ(kept.size(), (1000u - 2 + 1) / 14);  // "[" + 13 bytes a line, "," between + "]"
  EXPECT_EQ(kept.back(), "line 299999");
}

// The collectors share one deadline: with no time left, junit, classfiles and coverage all say so.
TEST(RunRecord, CollectorsShareOneDeadline) {
  namespace fs = std::filesystem;
  char pattern[] = "/tmp/capsule-record-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  std::ofstream(dir + "/TEST-a.xml") << R"(<testsuite tests="1"/>)";
  std::ofstream(dir + "/A.class") << "x";
  std::ofstream(dir + "/coverage.xml") << R"(<coverage lines-valid="4" lines-covered="3"/>)";
  spec::RunSpec spec = spec::parse_run_spec(
      json{{"argv", {"true"}},
           {"workspace", {{"path", dir}, {"mode", "rw"}}},
           {"collect", {{"junit", {"*.xml"}}, {"classfiles", {"*.class"}}, {"coverage", {"coverage.xml"}}}}},
      spec::default_limit_policy());
  sandbox::Result result;
  result.status = sandbox::Status::kSucceeded;
  RecordSources sources;
  sources.collect_time = std::chrono::milliseconds(-1);
  const json record = build_record(spec, result, sources);
  for (const char* section : {"tests", "classfiles", "coverage"}) {
    EXPECT_EQ(record[section]["truncated"], true) << section << ": " << record.dump();
    EXPECT_NE(record[section]["unreadable"].dump().find("out of time"), std::string::npos) << record.dump();
  }
  fs::remove_all(dir);
}

TEST(RunRecord, StreamDigestsFromTheLogsAreWrittenIntoTheResult) {
  const spec::RunSpec spec = spec::parse_run_spec(json{{"argv", {"true"}}}, spec::default_limit_policy());
  sandbox::Result result;
  result.status = sandbox::Status::kSucceeded;
  result.stdout_capture.total_bytes = 3;
  RecordSources sources;
  sources.stdout_digest = StreamDigest{"sha256:abc", 3};
  const json record = build_record(spec, result, sources);
  EXPECT_EQ(record["result"]["stdout"]["sha256"], "sha256:abc");
  EXPECT_EQ(record["result"]["stdout"]["bytes"], 3);
  EXPECT_FALSE(record["result"]["stderr"].contains("sha256")) << "no log, no digest: " << record.dump();
}

TEST(RunRecord, CasesGiveWayBeforeTheOtherTestLists) {
  json cases = json::array();
  for (int i = 0; i < 2000; ++i) cases.push_back({{"class", "C"}, {"name", "t" + std::to_string(i)}, {"outcome", "passed"}});
  json record = {{"result", {{"exit_code", 0}}},
                 {"tests", {{"total", 2000}, {"cases", cases}, {"cases_truncated", false}, {"files", {"TEST-C.xml"}}}}};
  const json bounded = bound_record(record, 20000);
  EXPECT_LE(json_size(bounded), 20000u);
  EXPECT_EQ(bounded["tests"]["cases_truncated"], true);
  EXPECT_EQ(bounded["tests"]["total"], 2000);
  EXPECT_EQ(bounded["tests"]["files"], json({"TEST-C.xml"}));
  EXPECT_EQ(bounded["tests"]["cases"][0]["name"], "t0");
}

// build_record over a real rw workspace: every collector's section, and the tests' state after a failed build.
TEST(RunRecord, CollectorsFillTheirSections) {
  namespace fs = std::filesystem;
  char pattern[] = "/tmp/capsule-record-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  fs::create_directories(dir + "/target/classes");
  const char header[] = {'\xCA', '\xFE', '\xBA', '\xBE', 0, 0, 0, 61};
  std::ofstream(dir + "/target/classes/A.class", std::ios::binary).write(header, sizeof header);
  std::ofstream(dir + "/coverage.xml") << R"(<coverage lines-valid="4" lines-covered="3"/>)";

  spec::RunSpec spec = spec::parse_run_spec(
      json{{"argv", {"mvn"}},
           {"workspace", {{"path", dir}, {"mode", "rw"}}},
           {"collect", {{"junit", {"target/surefire-reports/*.xml"}}, {"classfiles", {"target/**/*.class"}},
                        {"coverage", {"coverage.xml"}}, {"tail_lines", 2}}}},
      spec::default_limit_policy());
  sandbox::Result result;
  result.status = sandbox::Status::kFailed;
  result.exit_code = 1;
  result.stdout_capture.head = result.stdout_capture.tail = "[INFO] a\n[ERROR] COMPILATION ERROR :\n[INFO] BUILD FAILURE\n";
  const json record = build_record(spec, result, {});
  EXPECT_EQ(record["result"]["stdout"]["tail_lines"], json({"[ERROR] COMPILATION ERROR :", "[INFO] BUILD FAILURE"}));
  EXPECT_EQ(record["tests"]["state"], "not_run");
  EXPECT_EQ(record["tests"]["compile_error"], true);
  EXPECT_EQ(record["classfiles"]["majors"], json({{"61", 1}}));
  EXPECT_EQ(record["coverage"]["total"]["lines"], json({{"covered", 3}, {"total", 4}}));
  EXPECT_FALSE(record.contains("collect_error")) << record.dump();
  fs::remove_all(dir);
}

TEST(RunRecord, FailureRecordSaysTheCause) {
  sandbox::Result result;
  result.exit_code = 3;
  const json record = failure_record("finishing the run failed: disk I/O error", result);
  EXPECT_EQ(record["result"]["reason"], "finishing the run failed: disk I/O error");
  EXPECT_EQ(record["result"]["exit_code"], 3);
}

}  // namespace
}  // namespace capsule::daemon

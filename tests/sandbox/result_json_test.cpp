// Result JSON: status names, field shape, and output bytes that are not valid UTF-8.
// The record must always serialise; invalid bytes become U+FFFD rather than breaking the JSON.
#include <gtest/gtest.h>

#include "sandbox/result_json.h"

namespace capsule::sandbox {
namespace {

TEST(ResultJson, InvalidUtf8IsReplacedNotDropped) {
  EXPECT_EQ(to_valid_utf8("plain"), "plain");
  EXPECT_EQ(to_valid_utf8("a\xff" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(to_valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(to_valid_utf8("cut \xC3"), "cut \xEF\xBF\xBD");  // a chunk boundary inside a character
}

TEST(ResultJson, ShapeAndStatusNames) {
  Result r;
  r.status = Status::kTimedOut;
  r.reason = "wall time limit of 10 ms exceeded";
  r.stdout_capture.head = "x\xfe";
  r.stdout_capture.total_bytes = 2;
  nlohmann::json j = result_to_json(r);
  EXPECT_EQ(j["status"], "timed_out");
  EXPECT_EQ(j["stdout"]["bytes"], 2);
  EXPECT_EQ(j["stdout"]["head"], "x\xEF\xBF\xBD");
  EXPECT_TRUE(j["setup_ms"].contains("mounts"));
  EXPECT_NO_THROW(j.dump());
  for (Status s : {Status::kSucceeded, Status::kFailed, Status::kOomKilled, Status::kSignaled, Status::kCancelled,
                   Status::kSetupFailed, Status::kInternalError}) {
    EXPECT_STRNE(status_name(s), "");
  }
}

TEST(ResultJson, TailLinesAndTermination) {
  Result r;
  r.stdout_capture.head = r.stdout_capture.tail = "one\ntwo\nthree\n";
  nlohmann::json j = result_to_json(r, 2);
  EXPECT_EQ(j["stdout"]["tail_lines"], nlohmann::json({"two", "three"}));
  EXPECT_EQ(j["stderr"]["tail_lines"], nlohmann::json::array());
  EXPECT_TRUE(j["termination"].is_null());  // capsule sent nothing
  EXPECT_EQ(result_to_json(r)["stdout"]["tail_lines"].size(), 3u);

  r.termination = {"idle_timeout", false, 0};
  EXPECT_EQ(result_to_json(r)["termination"], nlohmann::json({{"reason", "idle_timeout"}, {"sent", {"TERM"}}}));
  r.termination = {"cancelled", true, 5001};
  EXPECT_EQ(result_to_json(r)["termination"],
            nlohmann::json({{"reason", "cancelled"}, {"sent", {"TERM", "KILL"}}, {"kill_after_ms", 5001}}));
}

}  // namespace
}  // namespace capsule::sandbox

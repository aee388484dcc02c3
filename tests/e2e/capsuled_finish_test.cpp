// The end of a run against a real capsuled: records that a sandbox bloats stay under their ceiling, slow
// collection stays off the supervision loop, and output is relayed as exact bytes.
#include <unistd.h>

#include <algorithm>

#include "base/base64.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

// Output bytes of one stream from ndjson events; every output event carries data_b64 and no "data".
std::string decoded(const std::vector<json>& events, const std::string& stream) {
  std::string out;
  for (const auto& event : events) {
    if (event.value("event", "") != stream) continue;
    EXPECT_FALSE(event.contains("data")) << event;
    const auto bytes = base::base64_decode(event.value("data_b64", "?"));
    EXPECT_TRUE(bytes) << event;
    if (bytes) out += *bytes;
  }
  return out;
}

std::vector<json> stream_run(const HttpClient& client, const json& spec) {
  std::vector<json> events;
  const HttpResponse response = client.stream_lines("POST", "/v1/runs", spec, {{"Accept", "application/x-ndjson"}},
                                                    [&](std::string_view line) { events.push_back(json::parse(line)); });
  EXPECT_EQ(response.status, 200) << response.body;
  return events;
}

// Thousands of files whose long names are control characters (6 bytes each in JSON): the record stays under
// its ceiling with the diff's list cut and its totals whole, and the daemon answers.
TEST_F(Capsuled, RecordBloatedByControlCharacterNamesStaysUnderItsCeiling) {
  start();
  const fs::path workspace = make_dir("bloat");
  json spec = sh("n=$(printf '\\001\\002\\003\\004\\005\\006\\007\\010\\011\\013\\014\\016\\017\\020\\021\\022"
                 "\\023\\024\\025\\026\\027\\030\\031\\032\\033\\034\\035\\036\\037'); n=\"$n$n$n$n$n$n$n\"; "
                 "i=0; while [ $i -lt 12000 ]; do : > \"$n$i\"; i=$((i+1)); done; echo made");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["limits"] = {{"wall_time", "5m"}};
  const json run = run_and_wait(spec);
  ASSERT_TRUE(run["state"] == "succeeded" || run["state"] == "internal_error") << run["state"];
  const json& record = run["result"];
  if (run["state"] == "succeeded") {
    EXPECT_EQ(record["stdout"]["head"], "made\n");
    EXPECT_EQ(run["diff"]["totals"]["added"], 12000) << run["diff"]["totals"];
    EXPECT_EQ(run["diff"]["truncated"], true);
    EXPECT_LT(run["diff"]["added"].size(), 12000u);
  } else {
    EXPECT_FALSE(record.value("reason", "").empty()) << record;
  }
  EXPECT_LE(run.dump(-1, ' ', false, json::error_handler_t::replace).size(), 5u << 20);
  EXPECT_EQ(get_run(run["id"]), run);
  EXPECT_EQ(health()["status"], "ok");
}

// A directory chain past PATH_MAX in a cow workspace: the diff is there, with what came before it.
TEST_F(Capsuled, DirectoryChainPastPathMaxKeepsTheDiffAndTheTests) {
  start();
  const fs::path workspace = make_dir("deep");
  json spec = sh("echo '<testsuite tests=\"3\" failures=\"1\"/>' > TEST-a.xml; : > early.txt; "
                 "d=$(printf 'd%.0s' $(seq 200)); i=0; while [ $i -lt 40 ]; do mkdir \"$d\" && cd \"$d\"; "
                 "i=$((i+1)); done; echo deep > deep.txt");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["collect"] = {{"junit", {"**/TEST-*.xml"}}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run["result"];
  const json& diff = run["diff"];
  ASSERT_TRUE(diff.is_object()) << run["result"];
  EXPECT_FALSE(run.contains("collect_error")) << run["collect_error"];
  std::vector<std::string> paths;
  for (const auto& entry : diff["added"]) paths.push_back(entry["path"]);
  EXPECT_NE(std::find(paths.begin(), paths.end(), "early.txt"), paths.end()) << diff;
  EXPECT_NE(std::find(paths.begin(), paths.end(), "TEST-a.xml"), paths.end()) << diff;
  // The shell's cd stops near PATH_MAX (it tracks $PWD), leaving the chain's last directory empty there.
  EXPECT_GE(diff["totals"]["added"], 3) << diff;
  const bool deep_listed = std::any_of(paths.begin(), paths.end(), [](const std::string& path) {
    return path.size() == 4096 + 3 && path.ends_with("...");
  });
  EXPECT_TRUE(deep_listed) << "an entry past PATH_MAX is listed, its path cut";
  EXPECT_EQ(diff["truncated"], true);
  EXPECT_EQ(run["tests"]["total"], 3) << run["tests"];
  EXPECT_EQ(run["tests"]["failed"], 1);
}

// 150 sparse 63 MiB "reports" are skipped without being read (they used to hold the supervision loop for
// seconds); a neighbour with a 2 s wall-time limit times out meanwhile.
TEST_F(Capsuled, SparseReportsAreSkippedAndSaidSo) {
  start();
  const fs::path workspace = make_dir("reports");
  json reports = sh("mkdir -p r; i=0; while [ $i -lt 150 ]; do truncate -s 63M r/TEST-$i.xml; i=$((i+1)); done");
  reports["workspace"] = {{"path", workspace.string()}};
  reports["collect"] = {{"junit", {"r/*.xml"}}};
  json neighbour = sh("sleep 60");
  neighbour["limits"] = {{"wall_time", "2s"}};
  const std::string report_id = submit(reports);
  const std::string neighbour_id = submit(neighbour);
  const json report_run = wait_finished(report_id);
  const json neighbour_run = wait_finished(neighbour_id);
  ASSERT_EQ(report_run["state"], "succeeded") << report_run["result"];
  const json& tests = report_run["tests"];
  EXPECT_EQ(tests["total"], 0) << tests;
  EXPECT_EQ(tests["files"], json::array());
  ASSERT_EQ(tests["unreadable"].size(), 100u) << "listed up to the limit";
  EXPECT_EQ(tests["not_read"], 50) << "the rest counted";
  EXPECT_NE(tests["unreadable"][0].get<std::string>().find("is larger than the 16 MiB limit; not read"),
            std::string::npos)
      << tests["unreadable"][0];
  // Their 9.4 GB of zeros pass the kept outputs' 4 GiB cap: refused from their sizes, not read and written
  // first (that took the daemon's finisher 25 s of reading zeros).
  EXPECT_TRUE(report_run["outputs"]["workspace"].is_null()) << report_run["outputs"];
  EXPECT_NE(report_run["outputs"].value("reason", "").find("workspace not kept"), std::string::npos)
      << report_run["outputs"];
  EXPECT_EQ(neighbour_run["state"], "timed_out") << neighbour_run["result"];
  std::cout << "neighbour wall_ms: " << neighbour_run["result"]["wall_ms"] << "\n";
}

// Every byte value, then a 4-byte UTF-8 character split across two writes, arrive exactly as written.
TEST_F(Capsuled, NdjsonOutputEventsCarryTheExactBytes) {
  start();
  const std::vector<json> events = stream_run(
      client(), sh("i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; i=$((i+1)); done; "
                   "printf '\\360\\237'; sleep 0.3; printf '\\230\\200'; printf 'e\\377r' >&2"));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["event"], "finished");
  std::string expected;
  for (int i = 0; i < 256; ++i) expected += static_cast<char>(i);
  expected += "\xF0\x9F\x98\x80";
  EXPECT_EQ(decoded(events, "stdout"), expected);
  EXPECT_EQ(decoded(events, "stderr"), "e\xFFr");
  std::size_t stdout_events = 0;
  for (const auto& event : events) stdout_events += event["event"] == "stdout";
  EXPECT_GE(stdout_events, 2u) << "the character was split across events";
}

// A flooding run streamed to a client next to a timed neighbour: every byte arrives, the neighbour times out.
TEST_F(Capsuled, FloodIsRelayedWholeWhileANeighbourTimesOut) {
  start();
  json neighbour = sh("sleep 60");
  neighbour["limits"] = {{"wall_time", "2s"}};
  const std::string neighbour_id = submit(neighbour);
  const std::vector<json> events = stream_run(client(), sh("yes 0123456789abcdef | head -c 64M"));
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back()["event"], "finished");
  EXPECT_EQ(events.back()["run"]["state"], "succeeded");
  // A client slower than the flood misses events, never the stream: what it missed is counted.
  const std::string out = decoded(events, "stdout");
  std::uint64_t dropped = 0;
  for (const auto& event : events) {
    if (event["event"] == "dropped") dropped += event["bytes"].get<std::uint64_t>();
  }
  EXPECT_EQ(out.size() + dropped, 64u << 20);
  EXPECT_GT(out.size(), 0u);
  std::cout << "relayed " << out.size() << " bytes, dropped " << dropped << "\n";
  EXPECT_EQ(out.substr(0, 34), "0123456789abcdef\n0123456789abcdef\n");
  EXPECT_EQ(wait_finished(neighbour_id)["state"], "timed_out");
  EXPECT_EQ(health()["status"], "ok");
}

}  // namespace
}  // namespace capsule::testing

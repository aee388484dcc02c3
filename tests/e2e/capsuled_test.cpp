// Integration tests of capsuled's API against a real daemon process: every route, and every error path
// answering {"error": {"code", "message"}} with the right status.
#include <sys/utsname.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <sstream>

#include "base/base64.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

// ---------------------------------------------------------------------------------------------------------
// Every endpoint.

TEST_F(Capsuled, VersionReportsKernelCgroupVersionAndFeatures) {
  start();
  const HttpResponse response = call("GET", "/v1/version");
  ASSERT_EQ(response.status, 200);
  const json version = body_json(response);
  EXPECT_TRUE(version["version"].is_string() && !version["version"].get<std::string>().empty()) << version;
  EXPECT_EQ(version["api"], "v1");
  utsname name{};
  ::uname(&name);
  EXPECT_EQ(version["kernel"], name.release);
  EXPECT_EQ(version["cgroup_version"], cgroup_v1() ? 1 : 2);
  ASSERT_TRUE(version["features"].is_array()) << version;
  const auto features = version["features"].get<std::set<std::string>>();
  for (const char* feature : {"namespaces", "overlayfs", "seccomp", "cow-workspace", "junit", "ndjson-events"}) {
    EXPECT_TRUE(features.count(feature)) << feature << " missing from " << version["features"];
  }
}

TEST_F(Capsuled, HealthReportsIdleDaemon) {
  start();
  const HttpResponse response = call("GET", "/v1/health");
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(body_json(response), json::parse(R"({"status": "ok", "active": 0, "queued": 0, "draining": false})"));
}

TEST_F(Capsuled, MetricsExposeRunsQueueActiveSandboxesAndSetupHistogram) {
  start();
  EXPECT_EQ(run_and_wait(sh("true"))["state"], "succeeded");
  EXPECT_EQ(run_and_wait(sh("exit 2"))["state"], "failed");
  const HttpResponse response = call("GET", "/metrics");
  ASSERT_EQ(response.status, 200);
  EXPECT_TRUE(response.headers.at("content-type").starts_with("text/plain")) << response.headers.at("content-type");
  const std::string& text = response.body;
  for (const char* line : {"# TYPE capsule_runs gauge\n",
                           "capsule_runs{state=\"succeeded\"} 1\n",
                           "capsule_runs{state=\"failed\"} 1\n",
                           "capsule_runs{state=\"running\"} 0\n",
                           "# TYPE capsule_runs_finished_total counter\n",
                           "capsule_runs_finished_total{status=\"succeeded\"} 1\n",
                           "capsule_runs_finished_total{status=\"failed\"} 1\n",
                           "# TYPE capsule_queue_depth gauge\n",
                           "capsule_queue_depth 0\n",
                           "# TYPE capsule_active_sandboxes gauge\n",
                           "capsule_active_sandboxes 0\n",
                           "# TYPE capsule_setup_seconds histogram\n",
                           "capsule_setup_seconds_bucket{le=\"+Inf\"} 2\n",
                           "capsule_setup_seconds_count 2\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing '" << line << "' in:\n" << text;
  }
  // Cumulative buckets: never decreasing, ending at the count.
  std::istringstream lines(text);
  std::uint64_t previous = 0, buckets = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("capsule_setup_seconds_bucket{le=")) continue;
    const std::uint64_t count = std::stoull(line.substr(line.rfind(' ') + 1));
    EXPECT_GE(count, previous) << line;
    previous = count;
    ++buckets;
  }
  EXPECT_GT(buckets, 2u);
  EXPECT_EQ(previous, 2u);
}

TEST_F(Capsuled, SubmitAnswers202AndTheRunFinishesInTheBackground) {
  start();
  const std::string id = submit(sh("echo hello"));
  ASSERT_FALSE(id.empty());
  const json run = wait_finished(id);
  EXPECT_EQ(run["id"], id);
  EXPECT_EQ(run["state"], "succeeded");
  EXPECT_EQ(run["result"]["exit_code"], 0);
  EXPECT_EQ(run["result"]["stdout"]["head"], "hello\n");
  EXPECT_EQ(run["spec"]["argv"], json({"sh", "-c", "echo hello"}));
  for (const char* field : {"created", "started", "finished"}) EXPECT_TRUE(run["times"][field].is_number()) << field;
  EXPECT_LE(run["times"]["created"].get<std::int64_t>(), run["times"]["started"].get<std::int64_t>());
  EXPECT_LE(run["times"]["started"].get<std::int64_t>(), run["times"]["finished"].get<std::int64_t>());
  EXPECT_EQ(run["peer"]["uid"], ::getuid());
  EXPECT_EQ(run["peer"]["pid"], ::getpid());
}

TEST_F(Capsuled, SubmitWithWaitAnswersWithTheFinishedRecord) {
  start();
  json spec = sh("echo out; echo err >&2; cat; exit 3");
  spec["stdin"] = "from stdin\n";
  const json run = run_and_wait(spec);
  EXPECT_EQ(run["state"], "failed");
  const json& record = run["result"];
  EXPECT_EQ(run["state"], "failed");
  EXPECT_EQ(record["exit_code"], 3);
  EXPECT_EQ(record["stdout"]["head"], "out\nfrom stdin\n");
  EXPECT_EQ(record["stdout"]["bytes"], 15);
  EXPECT_EQ(record["stdout"]["truncated"], false);
  EXPECT_EQ(record["stderr"]["head"], "err\n");
  EXPECT_TRUE(record["wall_ms"].is_number());
  EXPECT_TRUE(record["setup_ms"]["total"].is_number());
  EXPECT_EQ(run["spec"]["image"], "host");
  EXPECT_EQ(run["spec"]["policy"], "default");
  EXPECT_EQ(get_run(run["id"]), run) << "the ledger holds what ?wait=true answered";
}

TEST_F(Capsuled, SubmitWithNdjsonStreamsEventsInOrder) {
  start();
  std::vector<json> events;
  const HttpResponse response = client().stream_lines(
      "POST", "/v1/runs", sh("echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three"),
      {{"Accept", "application/x-ndjson"}}, [&](std::string_view line) { events.push_back(json::parse(line)); });
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.headers.at("content-type"), "application/x-ndjson");
  ASSERT_GE(events.size(), 4u);
  const std::string id = events.front().value("id", "");
  EXPECT_EQ(events[0], json({{"event", "queued"}, {"id", id}}));
  EXPECT_EQ(events[1], json({{"event", "started"}, {"id", id}}));
  std::string out, err;
  for (std::size_t i = 2; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["id"], id);
    EXPECT_FALSE(events[i].contains("data")) << events[i];
    const std::optional<std::string> bytes = base::base64_decode(events[i].value("data_b64", "?"));
    ASSERT_TRUE(bytes) << events[i];
    if (events[i]["event"] == "stdout") out += *bytes;
    else if (events[i]["event"] == "stderr") err += *bytes;
    else ADD_FAILURE() << "unexpected event in the middle: " << events[i];
  }
  EXPECT_EQ(out, "one\nthree\n");
  EXPECT_EQ(err, "two\n");
  const json& last = events.back();
  EXPECT_EQ(last["event"], "finished");
  EXPECT_EQ(last["id"], id);
  EXPECT_EQ(last["run"]["state"], "succeeded");
  EXPECT_EQ(last["run"]["result"]["stdout"]["head"], "one\nthree\n");
  EXPECT_EQ(get_run(id), last["run"]);
}

TEST_F(Capsuled, ListFiltersByStateAndLabelAndPagesWithACursor) {
  start();
  std::vector<std::string> ids;  // in submission order
  for (int i = 0; i < 5; ++i) {
    json spec = sh(i == 3 ? "exit 1" : "true");
    spec["labels"] = {{"suite", "list"}, {"n", std::to_string(i)}};
    ids.push_back(run_and_wait(spec)["id"]);
  }
  json other = sh("true");
  other["labels"] = {{"suite", "other"}};
  const std::string other_id = run_and_wait(other)["id"];

  // All runs of the suite, two per page, newest first.
  std::vector<std::string> listed;
  std::string target = "/v1/runs?label=suite=list&limit=2";
  int pages = 0;
  for (;;) {
    const HttpResponse response = call("GET", target);
    ASSERT_EQ(response.status, 200) << response.body;
    const json page = body_json(response);
    ASSERT_TRUE(page["runs"].is_array());
    EXPECT_LE(page["runs"].size(), 2u);
    for (const auto& run : page["runs"]) {
      listed.push_back(run["id"]);
      EXPECT_EQ(run["labels"]["suite"], "list");
      EXPECT_TRUE(run.contains("result") && run.contains("spec"));
    }
    ++pages;
    if (page["next"].is_null()) break;
    ASSERT_TRUE(page["next"].is_string());
    EXPECT_EQ(page["next"], listed.back());
    target = "/v1/runs?label=suite=list&limit=2&after=" + page["next"].get<std::string>();
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(listed, std::vector<std::string>(ids.rbegin(), ids.rend()));

  const json failed = body_json(call("GET", "/v1/runs?state=failed"));
  ASSERT_EQ(failed["runs"].size(), 1u);
  EXPECT_EQ(failed["runs"][0]["id"], ids[3]);
  EXPECT_TRUE(failed["next"].is_null());

  EXPECT_EQ(list("?state=succeeded&label=suite=list").size(), 4u);
  const json by_label = list("?label=suite=other");
  ASSERT_EQ(by_label.size(), 1u);
  EXPECT_EQ(by_label[0]["id"], other_id);
  EXPECT_EQ(list("?label=suite=none"), json::array());
  EXPECT_EQ(list().size(), 6u);
}

TEST_F(Capsuled, LogsServeFullStdoutAndStderrBeyondTheRecordCap) {
  start();
  json spec = sh("seq 1 20000; echo oops >&2");
  spec["limits"] = {{"output_cap", "4k"}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run;
  std::string expected;
  for (int i = 1; i <= 20000; ++i) expected += std::to_string(i) + "\n";
  EXPECT_EQ(run["result"]["stdout"]["truncated"], true);
  EXPECT_EQ(run["result"]["stdout"]["bytes"], expected.size());
  const std::string id = run["id"];

  const HttpResponse out = call("GET", "/v1/runs/" + id + "/logs");
  ASSERT_EQ(out.status, 200);
  EXPECT_TRUE(out.headers.at("content-type").starts_with("text/plain"));
  EXPECT_EQ(out.body, expected);
  EXPECT_EQ(call("GET", "/v1/runs/" + id + "/logs?stream=stdout").body, expected);
  const HttpResponse err = call("GET", "/v1/runs/" + id + "/logs?stream=stderr");
  ASSERT_EQ(err.status, 200);
  EXPECT_EQ(err.body, "oops\n");
  // follow=true on a finished run is the whole log at once.
  EXPECT_EQ(call("GET", "/v1/runs/" + id + "/logs?stream=stderr&follow=true").body, "oops\n");
  expect_error(call("GET", "/v1/runs/" + id + "/logs?stream=both"), 400, "invalid_query", "stream");
}

TEST_F(Capsuled, FollowedLogsArriveWhileTheRunRunsAndEndWithIt) {
  start();
  const fs::path workspace = make_dir("follow");
  json spec = sh("echo tick 1; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo tick 2");
  spec["workspace"] = {{"path", workspace.string()}, {"mode", "ro"}};
  const std::string id = submit(spec);
  wait_running(id);

  std::mutex mutex;
  std::condition_variable changed;
  std::string received;
  bool done = false;
  HttpResponse response;
  std::thread follower([&] {
    try {
      const std::string target = "/v1/runs/" + id + "/logs?follow=true";
      response = client().stream("GET", target, nullptr, {}, [&](std::string_view data) {
        std::lock_guard lock(mutex);
        received += data;
        changed.notify_all();
      });
    } catch (const std::exception& e) {
      ADD_FAILURE() << "following the log failed: " << e.what();
    }
    std::lock_guard lock(mutex);
    done = true;
    changed.notify_all();
  });
  {
    // The run cannot end before the test creates /workspace/go, so this data came while it was running.
    std::unique_lock lock(mutex);
    EXPECT_TRUE(changed.wait_for(lock, 30s, [&] { return received == "tick 1\n" || done; })) << received;
    EXPECT_FALSE(done) << "the followed log ended while the run was still running: '" << received << "'";
  }
  EXPECT_EQ(get_run(id)["state"], "running");
  write_file(workspace / "go", "");
  follower.join();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(received, "tick 1\ntick 2\n");
  EXPECT_EQ(get_run(id)["state"], "succeeded") << "the followed log ends only when the run has ended";
}

TEST_F(Capsuled, CancelEndsARunningRunAsCancelled) {
  start();
  const std::string id = submit(json{{"argv", {"sleep", "60"}}});
  wait_running(id);
  ASSERT_TRUE(eventually([&] { return !sandbox_processes("sleep").empty(); })) << "sleep never started";
  const HttpResponse response = call("POST", "/v1/runs/" + id + "/cancel");
  EXPECT_EQ(response.status, 202) << response.body;
  const json body = body_json(response);
  EXPECT_EQ(body["id"], id);
  EXPECT_TRUE(body["state"] == "running" || body["state"] == "cancelled") << body;
  const json run = wait_for_run(id, [](const json& r) { return is_finished(r["state"]); }, 30s);
  EXPECT_EQ(run["state"], "cancelled");
  EXPECT_TRUE(sandbox_processes("sleep").empty());
}

// ---------------------------------------------------------------------------------------------------------
// Error paths: a status, {"error": {"code", "message"}}, and nothing recorded.

TEST_F(Capsuled, BodyThatIsNotJsonIs400InvalidJson) {
  start();
  const std::string body = "{\"argv\": [\"true\"";
  const RawResponse raw = raw_request(socket_, "POST /v1/runs HTTP/1.1\r\nHost: capsule\r\nConnection: close\r\n"
                                               "Content-Type: application/json\r\nContent-Length: " +
                                                   std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(raw.status, 400) << raw.head;
  EXPECT_NE(raw.head.find("Content-Type: application/json"), std::string::npos) << raw.head;
  expect_error_body(raw.body, "invalid_json", "JSON");
  expect_error(call("POST", "/v1/runs", json::array({"true"})), 400, "invalid_spec", "body");
  EXPECT_EQ(list(), json::array());
}

TEST_F(Capsuled, MalformedHttpIs400NotADroppedConnection) {
  start();
  const RawResponse raw = raw_request(socket_, "GET /v1/health HTTP/1.1\r\nno colon in this header\r\n\r\n");
  EXPECT_EQ(raw.status, 400) << raw.head;
  expect_error_body(raw.body, "bad_request", "");
  EXPECT_EQ(call("GET", "/v1/health").status, 200) << "the daemon survives";
}

TEST_F(Capsuled, UnknownFieldIs400NamingIt) {
  start();
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"colour", "red"}}), 400, "invalid_spec",
               "colour: unknown field");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"limits", {{"wall", "1s"}}}}), 400, "invalid_spec",
               "limits.wall: unknown field");
  expect_error(call("POST", "/v1/runs", json::object()), 400, "invalid_spec", "argv");
  EXPECT_EQ(list(), json::array());
}

TEST_F(Capsuled, BadLimitValueIs400NamingTheLimit) {
  start();
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"limits", {{"memory", "12x"}}}}), 400, "invalid_spec",
               "limits.memory: ");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"limits", {{"memory", -5}}}}), 400, "invalid_spec",
               "limits.memory: ");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"limits", {{"wall_time", "soon"}}}}), 400,
               "invalid_spec", "limits.wall_time: ");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"limits", {{"pids", 0}}}}), 400, "invalid_spec",
               "limits.pids: ");
  EXPECT_EQ(list(), json::array());
}

TEST_F(Capsuled, UnknownImageAndUnknownPolicyAre404) {
  start();
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"image", "no-such-image"}}), 404, "image_not_found",
               "no-such-image");
  expect_error(call("POST", "/v1/runs?wait=true", {{"argv", {"true"}}, {"policy", "no-such-policy"}}), 404,
               "policy_not_found", "no-such-policy");
  const HttpResponse streamed = call("POST", "/v1/runs", {{"argv", {"true"}}, {"policy", "no-such-policy"}},
                                     {{"Accept", "application/x-ndjson"}});
  expect_error(streamed, 404, "policy_not_found", "no-such-policy");
  EXPECT_EQ(list(), json::array()) << "rejected runs are not recorded";
}

TEST_F(Capsuled, WorkspaceThatIsNotADirectoryIs400) {
  start();
  const fs::path file = dir_ / "a-file";
  write_file(file, "not a directory\n");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"workspace", file.string()}}), 400, "invalid_spec",
               "workspace.path");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"workspace", {{"path", (dir_ / "missing").string()}}}}),
               400, "invalid_spec", "workspace.path");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"workspace", "relative/dir"}}), 400, "invalid_spec",
               "workspace.path");
  expect_error(call("POST", "/v1/runs", {{"argv", {"true"}}, {"workspace", {{"path", dir_.string()}, {"mode", "x"}}}}),
               400, "invalid_spec", "workspace.mode");
  EXPECT_EQ(list(), json::array());
}

TEST_F(Capsuled, UnknownRunIdIs404OnGetLogsAndCancel) {
  start();
  expect_error(call("GET", "/v1/runs/no-such-run"), 404, "not_found", "no-such-run");
  expect_error(call("GET", "/v1/runs/no-such-run/logs"), 404, "not_found", "no-such-run");
  expect_error(call("GET", "/v1/runs/no-such-run/logs?follow=true"), 404, "not_found", "no-such-run");
  expect_error(call("POST", "/v1/runs/no-such-run/cancel"), 404, "not_found", "no-such-run");
  expect_error(call("GET", "/v1/runs/..%2F..%2Fetc%2Fpasswd/logs"), 404, "not_found", "passwd");
}

TEST_F(Capsuled, CancelOfAFinishedRunIs409) {
  start();
  const json run = run_and_wait(sh("true"));
  const std::string id = run["id"];
  expect_error(call("POST", "/v1/runs/" + id + "/cancel"), 409, "already_finished", id);
  EXPECT_EQ(get_run(id), run) << "a refused cancel changes nothing";
}

TEST_F(Capsuled, UnknownRouteIs404AndWrongMethodIs405) {
  start();
  expect_error(call("GET", "/v1/nothing-here"), 404, "not_found", "");
  expect_error(call("GET", "/v2/runs"), 404, "not_found", "");
  const HttpResponse wrong = call("DELETE", "/v1/runs");
  expect_error(wrong, 405, "method_not_allowed", "");
  ASSERT_TRUE(wrong.headers.count("allow"));
  EXPECT_NE(wrong.headers.at("allow").find("GET"), std::string::npos);
  EXPECT_NE(wrong.headers.at("allow").find("POST"), std::string::npos);
  expect_error(call("POST", "/v1/version"), 405, "method_not_allowed", "");
  expect_error(call("GET", "/v1/runs/some-id/cancel"), 405, "method_not_allowed", "");
}

TEST_F(Capsuled, BadQueryIs400NamingTheParameter) {
  start();
  run_and_wait(sh("true"));
  expect_error(call("GET", "/v1/runs?label=novalue"), 400, "invalid_query", "label");
  expect_error(call("GET", "/v1/runs?label==value"), 400, "invalid_query", "label");
  expect_error(call("GET", "/v1/runs?limit=many"), 400, "invalid_query", "limit");
  expect_error(call("GET", "/v1/runs?limit=5x"), 400, "invalid_query", "limit");
  expect_error(call("GET", "/v1/runs?limit=-1"), 400, "invalid_query", "limit");
  expect_error(call("GET", "/v1/runs?after=no-such-cursor"), 400, "invalid_query", "after");
  expect_error(call("GET", "/v1/runs?state=sleeping"), 400, "invalid_query", "state");
}

}  // namespace
}  // namespace capsule::testing

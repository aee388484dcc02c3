// Replays through a real capsuled: pip and Maven runs replayed with their fixture upstream gone (same verdict,
// same dependency set, proxy frozen), an object the original never fetched refused by name, the pins a run
// records, --repeat and vary (pytest order reversed, MAVEN_OPTS, limits), `capsule replay`, and other users' runs.
#include <unistd.h>

#include <cstdio>
#include <set>

#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

using Objects = std::set<std::pair<std::string, std::string>>;  // url, sha256

Objects dependency_objects(const json& run) {
  Objects out;
  for (const auto& object : run["pinned"]["dependencies"]) {
    out.insert({object["url"].get<std::string>(), object["sha256"].get<std::string>()});
  }
  return out;
}

class CapsuledReplay : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    const std::string script = std::string(CAPSULE_SOURCE_DIR) + "/tests/proxy/fixtures/package_upstream.py";
    FILE* out = popen(("python3 " + script + " " + (dir_ / "fixture").string()).c_str(), "r");
    ASSERT_NE(out, nullptr);
    char line[4096] = {};
    const bool read = fgets(line, sizeof line, out) != nullptr;
    ASSERT_EQ(pclose(out), 0);
    ASSERT_TRUE(read);
    const json fixture = json::parse(line);
    const json config{{"proxy",
                       {{"pypi_mirror", fixture["pypi_mirror"]},
                        {"maven_mirror", {fixture["maven_mirror"]}},
                        {"maven_publish_times", fixture["maven_publish_times"]}}}};
    write_file(dir_ / "config.json", config.dump());
    start({"--config", (dir_ / "config.json").string()});
  }

  // The fixture upstream (local mirror trees) taken away: only the proxy's cache is left.
  void stop_upstream() { fs::rename(dir_ / "fixture", dir_ / "fixture-stopped"); }

  json replay_and_wait(const std::string& id, const json& body = json::object()) const {
    const HttpResponse response = call("POST", "/v1/runs/" + id + "/replay?wait=true", body);
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response)["runs"];
  }

  json proxy_run(const json& base, const std::string& as_of) const {
    json spec = base;
    spec["network"] = "proxy";
    spec["as_of"] = as_of;
    return run_and_wait(spec);
  }
};

TEST_F(CapsuledReplay, APipRunReplaysWithItsUpstreamStoppedFromTheSameObjects) {
  const json original =
      proxy_run(sh("cd /tmp && python3 -m pip download -q -d dl alpha beta >&2 && ls dl"), "2022-07-01");
  ASSERT_EQ(original["state"], "succeeded") << original.dump(2);
  const json& pinned = original["pinned"];
  EXPECT_FALSE(pinned["kernel"].get<std::string>().empty());
  EXPECT_EQ(pinned["capsule"], "0.1.0");
  EXPECT_EQ(pinned["host_image"].get<std::string>().rfind("sha256:", 0), 0u);
  EXPECT_EQ(pinned["replayable"], false);
  EXPECT_NE(pinned["not_replayable"].dump().find("the host image is the host's /usr"), std::string::npos);
  const Objects objects = dependency_objects(original);
  EXPECT_EQ(objects.size(), pinned["dependencies"].size()) << "once per URL";
  bool has_wheel = false;
  for (const auto& [url, sha256] : objects) has_wheel |= url.ends_with("/files/beta/beta-0.9-py3-none-any.whl");
  EXPECT_TRUE(has_wheel) << pinned["dependencies"].dump(2);

  stop_upstream();
  const json replays = replay_and_wait(original["id"]);
  ASSERT_EQ(replays.size(), 1u);
  const json& replay = replays[0];
  ASSERT_EQ(replay["state"], "succeeded") << replay.dump(2);
  EXPECT_EQ(replay["result"]["stdout"]["head"], original["result"]["stdout"]["head"]);
  EXPECT_EQ(dependency_objects(replay), objects);
  EXPECT_EQ(replay["replay_of"], original["id"]);
  EXPECT_EQ(replay["labels"]["capsule.replay_of"], original["id"]);
  EXPECT_EQ(replay["proxy"]["frozen_from"], original["id"]);
  EXPECT_EQ(replay["proxy"]["refused"], json::array());
  for (const auto& object : replay["proxy"]["served"]) EXPECT_EQ(object["source"], "frozen");
  EXPECT_EQ(replay["spec"]["argv"], original["spec"]["argv"]);
  EXPECT_FALSE(replay["spec"].contains("replay_of")) << "the spec stays submittable";
}

TEST_F(CapsuledReplay, AMavenRunReplaysWithItsUpstreamStopped) {
  const fs::path project = make_dir("maven-project");
  write_file(project / "pom.xml",
             "<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n"
             "  <modelVersion>4.0.0</modelVersion>\n"
             "  <parent><groupId>org.capsule.fixture</groupId><artifactId>parent</artifactId>"
             "<version>[1.0,2.0)</version><relativePath/></parent>\n"
             "  <artifactId>demo</artifactId><version>1</version><packaging>pom</packaging>\n"
             "</project>\n");
  json spec = sh("mvn -B -q validate >&2 && ls ~/.m2/repository/org/capsule/fixture/parent | grep '^[0-9]'");
  spec["workspace"] = {{"path", project.string()}, {"mode", "cow"}};
  spec["cwd"] = "/workspace";
  const json original = proxy_run(spec, "2022-12-31");
  ASSERT_EQ(original["state"], "succeeded") << original.dump(2);
  EXPECT_EQ(original["result"]["stdout"]["head"], "1.1\n");
  EXPECT_NE(original["pinned"]["not_replayable"].dump().find("without a snapshot"), std::string::npos)
      << "a host-directory workspace is said to be not byte for byte: " << original["pinned"].dump(2);
  stop_upstream();
  const json replay = replay_and_wait(original["id"])[0];
  ASSERT_EQ(replay["state"], "succeeded") << replay.dump(2);
  EXPECT_EQ(replay["result"]["stdout"]["head"], "1.1\n");
  EXPECT_EQ(dependency_objects(replay), dependency_objects(original));
  EXPECT_FALSE(dependency_objects(replay).empty());
}

TEST_F(CapsuledReplay, AnObjectTheOriginalNeverFetchedIsRefusedByName) {
  const fs::path work = make_dir("urls");
  const std::string alpha = "/pypi/snapshot/2022-07-01T00:00:00Z/simple/alpha/";
  const std::string beta = "/pypi/snapshot/2022-07-01T00:00:00Z/simple/beta/";
  write_file(work / "urls.txt", alpha + "\n");
  json spec = sh("python3 - <<'EOF'\n"
                 "import urllib.request, urllib.error\n"
                 "for url in open('/workspace/urls.txt').read().split():\n"
                 "    try:\n"
                 "        print(urllib.request.urlopen('http://127.0.0.1:3141' + url).status)\n"
                 "    except urllib.error.HTTPError as e:\n"
                 "        print(e.code, e.read().decode())\n"
                 "EOF\n");
  spec["workspace"] = {{"path", work.string()}, {"mode", "ro"}};
  const json original = proxy_run(spec, "2022-07-01");
  ASSERT_EQ(original["state"], "succeeded") << original.dump(2);
  EXPECT_EQ(original["result"]["stdout"]["head"], "200\n");
  write_file(work / "urls.txt", alpha + "\n" + beta + "\n");  // the workspace changed between the runs
  const json replay = replay_and_wait(original["id"])[0];
  ASSERT_EQ(replay["state"], "succeeded") << replay.dump(2);
  const std::string out = replay["result"]["stdout"]["head"];
  EXPECT_EQ(out.rfind("200\n404 ", 0), 0u) << out;
  EXPECT_NE(out.find("not fetched by the original run " + original["id"].get<std::string>() + ": " + beta),
            std::string::npos) << out;
  EXPECT_EQ(replay["proxy"]["refused"], json::array({beta}));
}

TEST_F(CapsuledReplay, RepeatGivesThatManyReplaysLabelledWithTheOriginal) {
  json spec = sh("echo hi");
  spec["labels"] = {{"team", "audit"}};
  const json original = run_and_wait(spec);
  ASSERT_EQ(original["state"], "succeeded");
  EXPECT_TRUE(original["replay_of"].is_null());
  const HttpResponse accepted = call("POST", "/v1/runs/" + original["id"].get<std::string>() + "/replay", {{"repeat", 3}});
  ASSERT_EQ(accepted.status, 202) << accepted.body;
  const json ids = body_json(accepted)["runs"];
  ASSERT_EQ(ids.size(), 3u);
  for (const auto& id : ids) {
    const json run = wait_finished(id);
    EXPECT_EQ(run["state"], "succeeded");
    EXPECT_EQ(run["replay_of"], original["id"]);
    EXPECT_EQ(run["labels"]["team"], "audit");
    EXPECT_TRUE(run["replay_vary"].is_null());
  }
  EXPECT_EQ(list("?label=capsule.replay_of=" + original["id"].get<std::string>()).size(), 3u);
  for (const json& bad : {json{{"repeat", 0}}, json{{"repeat", 51}}, json{{"vary", {{"disk", true}}}},
                          json{{"again", true}}}) {
    expect_error(call("POST", "/v1/runs/" + original["id"].get<std::string>() + "/replay", bad), 400,
                 "invalid_request", bad.begin().key());
  }
  expect_error(call("POST", "/v1/runs/nope/replay"), 404, "not_found", "nope");
  const std::string running = submit(sh("sleep 60"));
  wait_running(running);
  expect_error(call("POST", "/v1/runs/" + running + "/replay"), 409, "run_active", "has not finished");
  ASSERT_EQ(call("POST", "/v1/runs/" + running + "/cancel").status, 202);
  wait_finished(running);
}

TEST_F(CapsuledReplay, VaryReversesPytestOrderAndSetsMavenOptsAndLimitsOnEveryOtherReplay) {
  const fs::path tests = make_dir("pytests");
  write_file(tests / "test_order.py",
             "def test_a():\n    print('ran a')\n\n\ndef test_b():\n    pass\n\n\ndef test_c():\n    pass\n");
  json spec = sh("echo \"MAVEN_OPTS=$MAVEN_OPTS\"; python3 -m pytest -q -p no:cacheprovider --collect-only test_order.py "
                 "| grep '::'");
  spec["workspace"] = {{"path", tests.string()}, {"mode", "ro"}};
  spec["limits"] = {{"cpus", 2}, {"memory", "512m"}};
  const json original = run_and_wait(spec);
  ASSERT_EQ(original["state"], "succeeded") << original.dump(2);
  const std::string in_order = "test_order.py::test_a\ntest_order.py::test_b\ntest_order.py::test_c\n";
  EXPECT_EQ(original["result"]["stdout"]["head"], "MAVEN_OPTS=\n" + in_order);
  const json replays = replay_and_wait(original["id"], {{"repeat", 2}, {"vary", {{"order", true}, {"cpus", true}, {"memory", true}}}});
  ASSERT_EQ(replays.size(), 2u);
  const json& varied = replays[0];
  ASSERT_EQ(varied["state"], "succeeded") << varied.dump(2);
  EXPECT_EQ(varied["result"]["stdout"]["head"],
            "MAVEN_OPTS=-Dsurefire.runOrder=reversealphabetical\n"
            "test_order.py::test_c\ntest_order.py::test_b\ntest_order.py::test_a\n");
  EXPECT_EQ(varied["replay_vary"], json::array({"cpus", "memory", "order"}));
  EXPECT_EQ(varied["spec"]["limits"]["cpus"], 1);
  EXPECT_EQ(varied["spec"]["limits"]["memory"], 384ull << 20);
  const json& plain = replays[1];
  EXPECT_EQ(plain["result"]["stdout"]["head"], "MAVEN_OPTS=\n" + in_order) << "every other replay is varied";
  EXPECT_TRUE(plain["replay_vary"].is_null());

  // The varied replay's stored spec is itself a request that runs the same thing.
  const HttpResponse again = call("POST", "/v1/runs?wait=true", {{"spec", varied["spec"]}, {"pinned", varied["pinned"]}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(body_json(again)["result"]["stdout"]["head"], varied["result"]["stdout"]["head"]);
}

TEST_F(CapsuledReplay, TheCliFollowsAReplayLikeARunAndReportsRepeats) {
  const json original = run_and_wait(sh("echo replayed; exit 3"));
  ASSERT_EQ(original["state"], "failed");
  const std::string id = original["id"];
  const Cli one = run_capsule_cli(dir_, {"--socket", socket_, "replay", id});
  EXPECT_EQ(one.code, 3) << one.err;
  EXPECT_EQ(one.out, "replayed\n");
  EXPECT_NE(one.err.find("failed"), std::string::npos) << one.err;
  const Cli repeated = run_capsule_cli(dir_, {"--socket", socket_, "replay", id, "--repeat", "2"});
  EXPECT_EQ(repeated.code, 0) << repeated.err;
  EXPECT_TRUE(repeated.err.find("flakiness") != std::string::npos || repeated.out.find("flakiness") != std::string::npos)
      << repeated.out << repeated.err;
  const Cli bad = run_capsule_cli(dir_, {"--socket", socket_, "replay", id, "--vary", "disk"});
  EXPECT_EQ(bad.code, 125) << bad.err;
  EXPECT_NE(bad.err.find("--vary"), std::string::npos) << bad.err;
}

const std::string kReplayGroup = account_name("capsule-r");

class CapsuledReplayUsers : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kReplayGroup);
      alice_ = create_user(account_name("capsule-r-alice"), kReplayGroup, {});
      bob_ = create_user(account_name("capsule-r-bob"), kReplayGroup, {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    remove_user(account_name("capsule-r-alice"));
    remove_user(account_name("capsule-r-bob"));
    remove_group(kReplayGroup);
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    write_file(dir_ / "capsuled.json", json{{"socket_group", kReplayGroup}}.dump());
    start({"--config", (dir_ / "capsuled.json").string()});
  }
  static inline TestUser alice_, bob_;
  static inline std::string setup_error_;
};

TEST_F(CapsuledReplayUsers, OnlyACallerWhoMaySeeTheOriginalReplaysItAndAsItself) {
  const UserCall own = call_as(alice_, socket_, "POST", "/v1/runs?wait=true", sh("id -u"));
  ASSERT_EQ(own.status, 200) << own.body;
  const std::string id = own.json()["id"];
  const UserCall hostile = call_as(bob_, socket_, "POST", "/v1/runs/" + id + "/replay", json::object());
  EXPECT_EQ(hostile.status, 404) << hostile.body;
  EXPECT_NE(hostile.body.find("no run with id " + id), std::string::npos) << hostile.body;
  const UserCall replayed = call_as(alice_, socket_, "POST", "/v1/runs/" + id + "/replay?wait=true", json::object());
  ASSERT_EQ(replayed.status, 200) << replayed.body;
  const json run = replayed.json()["runs"][0];
  EXPECT_EQ(run["peer"]["uid"], alice_.uid);
  EXPECT_EQ(run["replay_of"], id);
  // Root may see every run; its replay of alice's run is root's.
  const HttpResponse by_root = call("POST", "/v1/runs/" + id + "/replay?wait=true");
  ASSERT_EQ(by_root.status, 200) << by_root.body;
  EXPECT_EQ(body_json(by_root)["runs"][0]["peer"]["uid"], 0);
}

}  // namespace
}  // namespace capsule::testing

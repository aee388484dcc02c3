// GET /v1/runs/diff, GET /v1/runs/flakiness and `capsule runs diff` against a real capsuled: runs whose JUnit
// reports differ, a case failing one run in three, other users' runs (404) and a live run (409); protect globs
// failing the verdict of a run that creates a matching file.
#include <unistd.h>

#include "daemon/record/run_verdict.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

const std::string kDiffGroup = account_name("capsule-td");

// A run that writes a JUnit report with pkg.T.flaky (failing when $FAIL is set) and pkg.T.steady, prints its
// outcome and exits 1 when it failed.
json junit_run(const fs::path& workspace, bool fail) {
  json spec = sh(R"(cd /workspace
if [ -n "$FAIL" ]; then flaky='<testcase classname="pkg.T" name="flaky"><failure message="boom"/></testcase>'
else flaky='<testcase classname="pkg.T" name="flaky"/>'; fi
printf '<testsuite name="pkg.T">%s<testcase classname="pkg.T" name="steady"/></testsuite>\n' "$flaky" > TEST-pkg.T.xml
echo "outcome: ${FAIL:-pass}"
[ -z "$FAIL" ])");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["collect"] = {{"junit", {"TEST-*.xml"}}};
  if (fail) spec["env"] = {{"FAIL", "yes"}};
  return spec;
}

// alice and bob are members of the socket's group: each sees only their own runs; root sees all.
class CapsuledRunsDiff : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kDiffGroup);
      alice_ = create_user(account_name("capsule-td-alice"), kDiffGroup, {});
      bob_ = create_user(account_name("capsule-td-bob"), kDiffGroup, {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    for (const char* user : {"capsule-td-alice", "capsule-td-bob"}) remove_user(account_name(user));
    remove_group(kDiffGroup);
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    const fs::path config = dir_ / "capsuled.json";
    write_file(config, json{{"socket_group", kDiffGroup}}.dump());
    start({"--config", config.string()});
  }

  Cli capsule(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args);
  }
  std::string finished_run(const json& spec) const {
    const json run = run_and_wait(spec);
    EXPECT_TRUE(is_finished(run["state"])) << run;
    return run["id"];
  }

  static inline TestUser alice_, bob_;
  static inline std::string setup_error_;
};

TEST_F(CapsuledRunsDiff, DiffShowsTheChangedCasesAndTheStdoutDigests) {
  const fs::path workspace = make_dir("ws");
  const std::string passed = finished_run(junit_run(workspace, false));
  const std::string failed = finished_run(junit_run(workspace, true));
  const std::string passed_again = finished_run(junit_run(workspace, false));

  const json run = get_run(passed);
  const std::string digest = run["result"]["stdout"].value("sha256", "");
  EXPECT_EQ(digest.size(), 7u + 64u) << run["result"]["stdout"];
  EXPECT_EQ(run["result"]["stdout"]["bytes"], std::string("outcome: pass\n").size());

  const HttpResponse response = call("GET", "/v1/runs/diff?a=" + passed + "&b=" + failed);
  ASSERT_EQ(response.status, 200) << response.body;
  const json diff = body_json(response);
  EXPECT_EQ(diff["same_verdict"], false) << diff;
  EXPECT_EQ(diff["verdict"], json({{"a", "passed"}, {"b", "failed"}}));
  EXPECT_EQ(diff["status"], json({{"a", "succeeded"}, {"b", "failed"}}));
  EXPECT_EQ(diff["exit_code"], json({{"a", 0}, {"b", 1}}));
  EXPECT_EQ(diff["tests"]["changed"], json::parse(R"([{"name": "pkg.T.flaky", "a": "passed", "b": "failed"}])"));
  EXPECT_EQ(diff["tests"]["b"]["failed"], 1);
  EXPECT_EQ(diff["stdout"]["same"], false);
  EXPECT_EQ(diff["stdout"]["a"], digest);
  EXPECT_EQ(diff["stderr"]["same"], true) << "both empty";
  EXPECT_TRUE(diff["files"].is_object()) << "cow runs have workspace diffs: " << diff;

  const json same = body_json(call("GET", "/v1/runs/diff?a=" + passed + "&b=" + passed_again));
  EXPECT_EQ(same["same_verdict"], true) << same;
  EXPECT_EQ(same["stdout"]["same"], true);
  EXPECT_EQ(same["tests"]["changed"], json::array());
  EXPECT_EQ(same["files"]["changed"], json::array()) << "the same report, the same size";

  // The CLI exits like diff(1): 0 same verdicts, 1 different, 2 trouble.
  const Cli differ = capsule({"runs", "diff", passed, failed});
  EXPECT_EQ(differ.code, 1) << differ.err;
  EXPECT_NE(differ.out.find("verdict: DIFFERENT: passed -> failed"), std::string::npos) << differ.out;
  EXPECT_NE(differ.out.find("changed  pkg.T.flaky: passed -> failed"), std::string::npos) << differ.out;
  EXPECT_NE(differ.out.find("stdout: different"), std::string::npos) << differ.out;
  const Cli alike = capsule({"runs", "diff", passed, passed_again, "--json"});
  EXPECT_EQ(alike.code, 0) << alike.err;
  EXPECT_EQ(json::parse(alike.out)["same_verdict"], true);
  const Cli unknown = capsule({"runs", "diff", passed, "no-such-run"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("no run with id no-such-run"), std::string::npos) << unknown.err;
  EXPECT_EQ(capsule({"runs", "diff", passed}).code, 2) << "usage";

  expect_error(call("GET", "/v1/runs/diff?a=" + passed), 400, "invalid_query", "b");
}

TEST_F(CapsuledRunsDiff, FlakinessReportsACaseFailingOneRunInThree) {
  const fs::path workspace = make_dir("ws");
  std::string ids;
  for (int i = 0; i < 6; ++i) ids += (ids.empty() ? "" : ",") + finished_run(junit_run(workspace, i % 3 == 2));
  const HttpResponse response = call("GET", "/v1/runs/flakiness?runs=" + ids);
  ASSERT_EQ(response.status, 200) << response.body;
  const json report = body_json(response);
  EXPECT_EQ(report["runs"], 6);
  EXPECT_EQ(report["verdict"]["passed"], 4);
  EXPECT_EQ(report["verdict"]["failed"], 2);
  EXPECT_DOUBLE_EQ(report["verdict"]["flip_rate"].get<double>(), 1.0 / 3);
  ASSERT_EQ(report["cases"].size(), 2u) << report;
  EXPECT_EQ(report["cases"][0]["name"], "pkg.T.flaky");
  EXPECT_EQ(report["cases"][0]["passed"], 4);
  EXPECT_EQ(report["cases"][0]["failed"], 2);
  EXPECT_DOUBLE_EQ(report["cases"][0]["flip_rate"].get<double>(), 1.0 / 3);
  EXPECT_EQ(report["cases"][1]["flip_rate"], 0.0);
  EXPECT_EQ(report["flaky"], json({"pkg.T.flaky"}));

  const std::string first = ids.substr(0, ids.find(','));
  expect_error(call("GET", "/v1/runs/flakiness?runs=" + first), 400, "invalid_query", "from 2 to 100");
  expect_error(call("GET", "/v1/runs/flakiness?runs=" + first + "," + first), 400, "invalid_query", "twice");
  expect_error(call("GET", "/v1/runs/flakiness?runs=" + first + ",nope"), 404, "not_found", "nope");
}

TEST_F(CapsuledRunsDiff, AnotherUsersRunsAreUnknownToTheCaller) {
  const UserCall alices = call_as(alice_, socket_, "POST", "/v1/runs?wait=true", sh("echo alice"));
  ASSERT_EQ(alices.status, 200) << alices.body << alices.failure;
  const UserCall bobs = call_as(bob_, socket_, "POST", "/v1/runs?wait=true", sh("echo bob"));
  ASSERT_EQ(bobs.status, 200) << bobs.body << bobs.failure;
  const std::string alice_run = alices.json()["id"], bob_run = bobs.json()["id"];
  for (const std::string& target : {"/v1/runs/diff?a=" + bob_run + "&b=" + alice_run,
                                    "/v1/runs/flakiness?runs=" + bob_run + "," + alice_run}) {
    const UserCall refused = call_as(bob_, socket_, "GET", target);
    EXPECT_EQ(refused.status, 404) << target << ": " << refused.body;
    EXPECT_EQ(refused.json()["error"]["message"], "no run with id " + alice_run) << "as for an unknown id";
    EXPECT_EQ(call("GET", target).status, 200) << "root sees both";
  }
  const UserCall own = call_as(alice_, socket_, "GET", "/v1/runs/diff?a=" + alice_run + "&b=" + alice_run);
  EXPECT_EQ(own.status, 200) << own.body;
}

TEST_F(CapsuledRunsDiff, SessionExecsCarryStreamDigestsAndCompare) {
  const HttpResponse created = call("POST", "/v1/sessions", json::object());
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string session = body_json(created)["id"];
  const auto exec = [&](const std::string& script) {
    const HttpResponse response = call("POST", "/v1/sessions/" + session + "/exec", sh(script));
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response);
  };
  const json first = exec("echo one"), second = exec("echo one; echo two >&2");
  EXPECT_EQ(first["result"]["stdout"]["sha256"], second["result"]["stdout"]["sha256"]) << first["result"];
  const json diff = body_json(call("GET", "/v1/runs/diff?a=" + first["id"].get<std::string>() + "&b=" +
                                             second["id"].get<std::string>()));
  EXPECT_EQ(diff["stdout"]["same"], true) << diff;
  EXPECT_EQ(diff["stderr"]["same"], false);
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + session).status, 200);
}

TEST_F(CapsuledRunsDiff, ALiveRunCannotBeCompared) {
  const std::string done = finished_run(sh("true"));
  const std::string live = submit(sh("sleep 60"));
  wait_running(live);
  expect_error(call("GET", "/v1/runs/diff?a=" + done + "&b=" + live), 409, "run_active", live);
  expect_error(call("GET", "/v1/runs/flakiness?runs=" + done + "," + live), 409, "run_active", live);
  ASSERT_EQ(call("POST", "/v1/runs/" + live + "/cancel").status, 202);
  wait_finished(live);
}

// Issue 35's hack, for real: run B adds a root conftest.py that marks every test skipped, so pytest exits 0 and the
// run succeeds. protect_test_config names the conftest, the baseline check finds the cases newly skipped, both
// fail the verdict (and `capsule run` exits 123), and `runs diff` fails unless --allow-removed.
TEST_F(CapsuledRunsDiff, AConftestThatSkipsEverythingIsCaughtByTheVerdict) {
  if (std::system("/usr/bin/python3 -c 'import pytest' 2>/dev/null") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with pytest is not installed (scripts/install-deps.sh)";
  }
  const fs::path workspace = make_dir("pyproject");
  fs::create_directories(workspace / "tests");
  write_file(workspace / "calc.py", "def add(a, b):\n    return a + b\n");
  write_file(workspace / "tests/test_calc.py",
             "from calc import add\n\ndef test_adds():\n    assert add(2, 3) == 5\n\n"
             "def test_zero():\n    assert add(0, 0) == 0\n\ndef test_negative():\n    assert add(-1, 1) == 0\n");
  const std::string pytest = "python3 -m pytest -p no:cacheprovider --junitxml=build/junit.xml tests";
  const auto pytest_spec = [&](const std::string& script) {
    json spec = sh("cd /workspace && " + script);
    spec["workspace"] = {{"path", workspace.string()}};
    spec["env"] = {{"PYTHONPATH", "/workspace"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
    spec["collect"] = {{"junit", {"build/junit.xml"}}};
    return spec;
  };
  const json a = run_and_wait(pytest_spec(pytest));
  ASSERT_EQ(a["state"], "succeeded") << a;
  ASSERT_EQ(a["tests"]["total"], 3) << a["tests"];
  const std::string a_id = a["id"];
  EXPECT_EQ(a["test_config_changes"], json::array()) << "a's run changed no test configuration";

  const std::string skip_all =
      "printf 'import pytest\\n\\ndef pytest_collection_modifyitems(items):\\n    for item in items:\\n"
      "        item.add_marker(pytest.mark.skip)\\n' > conftest.py && " + pytest;
  json spec = pytest_spec(skip_all);
  spec["baseline"] = {{"run", a_id}};
  spec["protect_test_config"] = true;
  const json b = run_and_wait(spec);
  ASSERT_EQ(b["state"], "succeeded") << "the status stays the process's: " << b;
  EXPECT_EQ(b["tests"]["skipped"], 3) << b["tests"];
  EXPECT_EQ(b["test_config_changes"],
            json::parse(R"([{"path": "conftest.py", "kind": "pytest_conftest", "detail": "added"}])")) << b;
  ASSERT_EQ(b["protect_violations"].size(), 1u) << b;
  EXPECT_EQ(b["protect_violations"][0]["path"], "conftest.py");
  EXPECT_EQ(b["baseline"]["run"], a_id) << b["baseline"];
  EXPECT_EQ(b["baseline"]["verdict"], "regressed") << b["baseline"];
  EXPECT_EQ(b["baseline"]["reasons"], json({"tests_newly_skipped"}));
  EXPECT_EQ(b["baseline"]["newly_skipped"]["count"], 3);
  EXPECT_EQ(b["baseline"]["newly_skipped"]["cases"][0],
            json({{"name", "tests.test_calc.test_adds"}, {"a", "passed"}})) << b["baseline"];

  const json diff = body_json(call("GET", "/v1/runs/diff?a=" + a_id + "&b=" + b["id"].get<std::string>()));
  EXPECT_EQ(diff["verdict"], json({{"a", "passed"}, {"b", "failed"}})) << diff;
  EXPECT_EQ(diff["check"]["verdict"], "regressed") << diff["check"];
  EXPECT_EQ(diff["tests"]["newly_skipped_count"], 3);

  // Without the conftest check, only the baseline fails it; `capsule run` says so by its exit status.
  const Cli run = capsule({"run", "--workspace", workspace.string(), "--junit", "build/junit.xml", "--baseline", a_id,
                           "--env", "PYTHONPATH=/workspace", "--env", "PYTHONDONTWRITEBYTECODE=1", "--json", "--",
                           "/bin/sh", "-c", "cd /workspace && " + skip_all});
  EXPECT_EQ(run.code, 123) << run.err << run.out;
  const Cli allowed = capsule({"run", "--workspace", workspace.string(), "--junit", "build/junit.xml", "--baseline",
                               a_id, "--allow-removed", "--env", "PYTHONPATH=/workspace", "--json", "--", "/bin/sh",
                               "-c", "cd /workspace && " + skip_all});
  EXPECT_EQ(allowed.code, 0) << allowed.err << allowed.out;
  const json allowed_run = json::parse(allowed.out);
  EXPECT_EQ(allowed_run["baseline"]["allowed"], json({"tests_newly_skipped"})) << allowed_run["baseline"];
  const Cli regressed = capsule({"runs", "diff", a_id, allowed_run["id"]});
  EXPECT_EQ(regressed.code, 1) << regressed.out;
  EXPECT_NE(regressed.out.find("verdict: REGRESSED (tests_newly_skipped): 0 removed, 3 newly skipped"),
            std::string::npos) << regressed.out;
  EXPECT_EQ(capsule({"runs", "diff", a_id, allowed_run["id"], "--allow-removed"}).code, 0);
}

TEST_F(CapsuledRunsDiff, ABaselineMustBeAFinishedRunTheCallerCanRead) {
  json spec = junit_run(make_dir("ws"), false);
  spec["baseline"] = {{"run", "no-such-run"}};
  expect_error(call("POST", "/v1/runs", spec), 404, "baseline_not_found", "no-such-run");
  spec["baseline"] = {{"run", "a b"}};
  expect_error(call("POST", "/v1/runs", spec), 400, "invalid_spec", "baseline.run");
  json without_junit = sh("true");
  without_junit["baseline"] = {{"run", "x"}};
  expect_error(call("POST", "/v1/runs", without_junit), 400, "invalid_spec", "collect.junit");

  const UserCall alices = call_as(alice_, socket_, "POST", "/v1/runs?wait=true", sh("echo alice"));
  ASSERT_EQ(alices.status, 200) << alices.body << alices.failure;
  json bobs = sh("true");
  bobs["collect"] = {{"junit", {"*.xml"}}};
  bobs["baseline"] = {{"run", alices.json()["id"]}};
  const UserCall refused = call_as(bob_, socket_, "POST", "/v1/runs?wait=true", bobs);
  EXPECT_EQ(refused.status, 404) << refused.body;
  EXPECT_EQ(refused.json()["error"]["code"], "baseline_not_found") << refused.body;

  const std::string live = submit(sh("sleep 60"));
  wait_running(live);
  spec["baseline"] = {{"run", live}};
  expect_error(call("POST", "/v1/runs", spec), 409, "run_active", live);
  ASSERT_EQ(call("POST", "/v1/runs/" + live + "/cancel").status, 202);
  wait_finished(live);
}

// Protect globs against files created, not only changed: a run that adds a conftest.py or a file below a
// protected directory keeps its exit status but fails its verdict (record.protect_violations); one that adds
// other files passes.
// A run of `script` in a cow copy of `workspace` with the protect globs `protect`.
json protected_run(const fs::path& workspace, const std::string& script, const json& protect) {
  json spec = sh(script);
  spec["workspace"] = {{"path", workspace.string()}, {"mode", "cow"}};
  spec["protect"] = protect;
  return spec;
}

const json kRunProtectGlobs = {"conftest.py", "tests/**", "docs/**"};

TEST_F(CapsuledRunsDiff, ARunThatCreatesAProtectedFileFailsItsVerdict) {
  const fs::path workspace = make_dir("ws");
  fs::create_directories(workspace / "tests");
  write_file(workspace / "tests" / "test_a.py", "def test_a(): pass\n");
  const json planted = run_and_wait(protected_run(workspace,
                              "echo 'collect_ignore_glob = [\"*\"]' > /workspace/conftest.py && mkdir /workspace/docs "
                              "&& echo x > /workspace/docs/new.md && echo fine",
                              kRunProtectGlobs));
  EXPECT_EQ(planted["state"], "succeeded") << "the process's own outcome stays: " << planted;
  EXPECT_EQ(planted["protect_violations"], json::parse(R"([
    {"path": "conftest.py", "reason": "protect: added, matches 'conftest.py'"},
    {"path": "docs/new.md", "reason": "protect: added, matches 'docs/**'"}])")) << planted;
  EXPECT_FALSE(daemon::run_passed(planted));
  EXPECT_FALSE(fs::exists(workspace / "conftest.py")) << "a cow workspace leaves the host directory alone";

  // An existing protected directory is read-only: a new file in it is refused outright.
  const json refused = run_and_wait(protected_run(workspace, "touch /workspace/tests/test_new.py", kRunProtectGlobs));
  EXPECT_EQ(refused["state"], "failed") << refused;
  EXPECT_NE(refused["result"]["stderr"].value("head", "").find("Read-only file system"), std::string::npos) << refused;
  EXPECT_EQ(refused["protect_violations"], json::array()) << refused;

  const json other = run_and_wait(protected_run(workspace, "echo 'x = 1' > /workspace/helper.py && mkdir /workspace/src && "
                                       "echo y > /workspace/src/conftest.py", kRunProtectGlobs));
  EXPECT_EQ(other["state"], "succeeded") << other;
  EXPECT_EQ(other["protect_violations"], json::array()) << other;
  EXPECT_EQ(other["diff"]["totals"]["added"], 2) << other;
  EXPECT_TRUE(daemon::run_passed(other)) << other;

  expect_error(call("POST", "/v1/runs", json{{"argv", {"true"}}, {"protect", {"tests/**"}}}), 400, "invalid_spec",
               "protect: needs a cow or ro workspace");
  // `capsule run --protect` says so by its exit status.
  const Cli cli = capsule({"run", "--workspace", workspace.string(), "--protect", "conftest.py", "--protect", "tests/**",
                           "--", "/bin/sh", "-c", "touch /workspace/conftest.py"});
  EXPECT_EQ(cli.code, 123) << cli.err << cli.out;
  EXPECT_EQ(capsule({"run", "--workspace", workspace.string(), "--protect", "conftest.py", "--", "/bin/sh", "-c",
                     "touch /workspace/other.py"}).code, 0);
  EXPECT_EQ(run_and_wait(sh("true"))["state"], "succeeded") << "the daemon still answers";
}

}  // namespace
}  // namespace capsule::testing

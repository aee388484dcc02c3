// The evidence a harness reads from one run's record, through a real capsuled with real toolchains from the
// host: which signal ended the command and why, the output's last lines, the Python exception that ended it,
// test cases from pytest's JUnit XML, the class-file census of javac's output, coverage.py's Cobertura summary,
// and a compile error told apart from a project without tests.
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

TEST_F(Capsuled, RecordSaysWhichSignalEndedTheCommandAndWhy) {
  start();
  json polite = {{"argv", {"sleep", "60"}}, {"limits", {{"wall_time", 500}, {"kill_grace", "30s"}}}};
  const json termed = run_and_wait(polite);
  EXPECT_EQ(termed["state"], "timed_out") << termed["result"];
  EXPECT_EQ(termed["result"]["signal"], 15);
  EXPECT_EQ(termed["result"]["termination"], json({{"reason", "wall_time"}, {"sent", {"TERM"}}}));

  json stubborn = sh("trap '' TERM; while :; do sleep 1; done");
  stubborn["limits"] = {{"wall_time", 500}, {"kill_grace", 400}};
  const json killed = run_and_wait(stubborn);
  EXPECT_EQ(killed["state"], "timed_out") << killed["result"];
  EXPECT_EQ(killed["result"]["signal"], 9);
  const json& why = killed["result"]["termination"];
  EXPECT_EQ(why["reason"], "wall_time") << why;
  EXPECT_EQ(why["sent"], json({"TERM", "KILL"}));
  EXPECT_GE(why["kill_after_ms"].get<double>(), 400) << why;

  const json exited = run_and_wait(sh("exit 3"));
  EXPECT_EQ(exited["result"]["signal"], 0);
  EXPECT_TRUE(exited["result"]["termination"].is_null());
}

TEST_F(Capsuled, ACancelledRunSaysCapsuledEndedIt) {
  start();
  const std::string id = submit(json{{"argv", {"sleep", "60"}}, {"limits", {{"kill_grace", "30s"}}}});
  wait_running(id);
  ASSERT_TRUE(eventually([&] { return !sandbox_processes("sleep").empty(); })) << "sleep never started";
  EXPECT_EQ(call("POST", "/v1/runs/" + id + "/cancel").status, 202);
  const json run = wait_finished(id);
  EXPECT_EQ(run["state"], "cancelled") << run["result"];
  EXPECT_EQ(run["result"]["signal"], 15);
  EXPECT_EQ(run["result"]["termination"], json({{"reason", "cancelled"}, {"sent", {"TERM"}}}));
}

TEST_F(Capsuled, RecordKeepsTheLastLinesOfEachStream) {
  start();
  json spec = sh("seq 1 500; echo oops >&2");
  spec["collect"] = {{"tail_lines", 3}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run["result"];
  EXPECT_EQ(run["result"]["stdout"]["tail_lines"], json({"498", "499", "500"}));
  EXPECT_EQ(run["result"]["stderr"]["tail_lines"], json({"oops"}));
  EXPECT_EQ(run["result"]["stdout"]["truncated"], false);
  const std::string tail = run["result"]["stdout"]["tail"];
  EXPECT_TRUE(tail.ends_with("499\n500\n")) << "the tail is the stream's end even when nothing was cut";
  EXPECT_EQ(run["spec"]["collect"]["tail_lines"], 3);

  const json by_default = run_and_wait(sh("seq 1 500"));
  ASSERT_EQ(by_default["result"]["stdout"]["tail_lines"].size(), 100u);
  EXPECT_EQ(by_default["result"]["stdout"]["tail_lines"][0], "401");
  EXPECT_EQ(by_default["spec"]["collect"]["tail_lines"], 100);
  // The stored spec is a valid request: submitted again it runs the same collection.
  const json again = run_and_wait(run["spec"]);
  EXPECT_EQ(again["result"]["stdout"]["tail_lines"], json({"498", "499", "500"}));
}

// The host's python3 raising in a sandbox: the record names the exception that ended it.
TEST_F(Capsuled, RecordNamesThePythonExceptionThatEndedTheRun) {
  start();
  const json run = run_and_wait(
      json{{"argv", {"python3", "-c", "import json\ndef load():\n  return json.loads('{bad')\nload()"}}});
  ASSERT_EQ(run["state"], "failed") << run["result"];
  EXPECT_EQ(run["result"]["exception"],
            json({{"language", "python"},
                  {"type", "json.decoder.JSONDecodeError"},
                  {"message", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"}}))
      << run["result"]["stderr"];
  EXPECT_FALSE(run_and_wait(sh("echo plain >&2; exit 1"))["result"].contains("exception"));
}

TEST_F(Capsuled, PytestCasesAndCoverageFromARealRun) {
  // The sandbox sees the host's /usr: Debian's python3 and its packages, whatever else is first on PATH here.
  if (std::system("/usr/bin/python3 -c 'import pytest' 2>/dev/null") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with pytest is not installed (scripts/install-deps.sh)";
  }
  const bool coverage = std::system("/usr/bin/python3 -c 'import coverage' 2>/dev/null") == 0;
  start();
  const fs::path workspace = make_dir("pyproject");
  write_file(workspace / "app.py", "def add(a, b):\n    if a < 0:\n        return -1\n    return a + b\n");
  write_file(workspace / "tests/test_app.py",
             "import pytest\nfrom app import add\n\n"
             "def test_adds():\n    assert add(2, 3) == 5\n\n"
             "def test_breaks():\n    assert add(2, 2) == 5, 'two and two'\n\n"
             "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n");
  const std::string pytest = "-m pytest -p no:cacheprovider --junitxml=build/junit.xml tests";
  json spec = sh(coverage ? "python3 -m coverage run --branch --include='*/app.py' " + pytest +
                                "; status=$?; python3 -m coverage xml -o build/coverage.xml; exit $status"
                          : "python3 " + pytest);
  spec["workspace"] = {{"path", workspace.string()}};
  spec["env"] = {{"PYTHONPATH", "/workspace"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  spec["collect"] = {{"junit", {"build/junit.xml"}}, {"coverage", {"build/coverage.xml"}}};
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "failed") << run["result"];
  const json& tests = run["tests"];
  EXPECT_EQ(tests["state"], "reports") << tests;
  EXPECT_EQ(tests["compile_error"], false);
  EXPECT_EQ(tests["total"], 3) << tests;
  ASSERT_EQ(tests["cases"].size(), 3u) << tests;
  EXPECT_EQ(tests["cases"][0]["class"], "tests.test_app");
  EXPECT_EQ(tests["cases"][0]["name"], "test_adds");
  EXPECT_EQ(tests["cases"][0]["outcome"], "passed");
  EXPECT_TRUE(tests["cases"][0]["time"].is_number());
  EXPECT_EQ(tests["cases"][1]["outcome"], "failed");
  EXPECT_NE(tests["cases"][1]["message"].get<std::string>().find("two and two"), std::string::npos) << tests;
  EXPECT_EQ(tests["cases"][2]["outcome"], "skipped");
  EXPECT_EQ(tests["cases_truncated"], false);
  if (!coverage) GTEST_SKIP() << "python3-coverage is not installed (scripts/install-deps.sh): no coverage checked";
  const json& summary = run["coverage"];
  ASSERT_TRUE(summary.is_object()) << run.dump();
  ASSERT_EQ(summary["reports"].size(), 1u) << summary;
  EXPECT_EQ(summary["reports"][0]["format"], "cobertura");
  EXPECT_EQ(summary["reports"][0]["path"], "build/coverage.xml");
  // app.py: four statements, `return -1` never ran; the `if` has two branches, one taken.
  EXPECT_EQ(summary["total"]["lines"], json({{"covered", 3}, {"total", 4}})) << summary;
  EXPECT_EQ(summary["total"]["branches"]["covered"], 1) << summary;
  EXPECT_EQ(summary["total"]["branches"]["total"], 2) << summary;
}

TEST_F(Capsuled, ClassFileMajorsAndACompileErrorFromRealJavac) {
  if (!fs::exists("/usr/bin/javac")) GTEST_SKIP() << "no javac on the host (scripts/install-deps.sh)";
  start();
  const fs::path workspace = make_dir("javaproject");
  write_file(workspace / "src/demo/Calc.java", "package demo;\npublic final class Calc {\n"
                                               "  public static int add(int a, int b) { return a + b; }\n}\n");
  write_file(workspace / "src/demo/Main.java",
             "package demo;\npublic final class Main {\n"
             "  public static void main(String[] args) { System.out.println(Calc.add(1, 2)); }\n}\n");
  write_file(workspace / "legacy/old/Legacy.java", "package old;\npublic class Legacy {}\n");
  // The JDK's own paths: /usr is the host's in the sandbox, /etc/alternatives may not be.
  const std::string bin = fs::canonical("/usr/bin/javac").parent_path().string();
  json spec = sh(bin + "/javac -d target/classes src/demo/*.java && " + bin +
                 "/javac --release 8 -d target/classes legacy/old/Legacy.java && " + bin +
                 "/java -cp target/classes demo.Main");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["limits"] = {{"wall_time", "5m"}, {"memory", "2g"}};
  spec["collect"] = {{"junit", {"target/surefire-reports/*.xml"}}, {"classfiles", {"target/**/*.class"}}};
  const json built = run_and_wait(spec);
  ASSERT_EQ(built["state"], "succeeded") << built["result"];
  const json& census = built["classfiles"];
  ASSERT_TRUE(census.is_object()) << built.dump();
  const int major = census["expected"].get<int>();
  EXPECT_GE(major, 61) << "the host's JDK is 17 or later: " << census;
  EXPECT_EQ(census["majors"], json({{"52", 1}, {std::to_string(major), 2}}));
  EXPECT_EQ(census["odd"], json({{{"path", "target/classes/old/Legacy.class"}, {"major", 52}}}));
  EXPECT_EQ(built["tests"]["state"], "none_found") << "it succeeded and wrote no report: no tests";
  EXPECT_EQ(built["tests"]["compile_error"], false);

  write_file(workspace / "src/demo/Broken.java", "package demo;\npublic final class Broken { int x = }\n");
  spec["argv"] = {"sh", "-c", bin + "/javac -d target/classes src/demo/*.java"};
  const json broken = run_and_wait(spec);
  ASSERT_EQ(broken["state"], "failed") << broken["result"];
  EXPECT_EQ(broken["tests"]["state"], "not_run") << broken["tests"];
  EXPECT_EQ(broken["tests"]["compile_error"], true) << broken["result"]["stderr"];
  EXPECT_EQ(broken["classfiles"]["files"], 0) << "javac wrote nothing";
}

}  // namespace
}  // namespace capsule::testing

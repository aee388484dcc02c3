// Tests of the run flags: the one flag table (same letters for `capsule run` and capsule-launch), its readers,
// and the POST /v1/runs body `capsule run` builds from what a user types.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "client/cli_args.h"
#include "client/cli_run.h"

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------
// Body builder: flags as a user types them -> the exact POST /v1/runs body.

// The options that `args` (flags only) set, with the rows `flags` registered (every row when empty).
RunOptions parse(std::vector<std::string> args, std::initializer_list<RunFlag> flags = {}) {
  CLI::App app{"test"};
  RunOptions options;
  add_run_flags(app, options, flags);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  app.parse(reversed);
  return options;
}

json body_for(std::vector<std::string> args) {
  RunOptions options = parse(std::move(args));
  options.argv = {"sh", "-c", "echo hi"};
  return build_run_body(options);
}

TEST(RunBody, OnlyTheCommandWhenNoFlags) {
  EXPECT_EQ(body_for({}), json::parse(R"({"argv": ["sh", "-c", "echo hi"]})"));
}

TEST(RunBody, EveryFlagMapsToItsFieldWithValuesUntouched) {
  const json body = body_for({"jdk17", "--workspace", "/srv/project/", "--mode", "ro", "-w", "/workspace/sub",
                              "--timeout", "10m", "--cpu-time", "5m", "--kill-grace", "15s", "--memory", "4g", "--cpus", "1.5", "--pids",
                              "512", "-e", "A=1", "--env", "B=x=y", "--label", "suite=unit", "-l", "k=v", "--junit",
                              "target/*.xml", "--junit", "build/**/*.xml", "--collect-classfiles", "target/**/*.class",
                              "--collect-classfiles", "out/*.class", "--collect-coverage", "site/jacoco.xml",
                              "--tail-lines", "20", "--network", "none", "--policy", "build"});
  EXPECT_EQ(body, json::parse(R"({
    "image": "jdk17",
    "argv": ["sh", "-c", "echo hi"],
    "env": {"A": "1", "B": "x=y"},
    "labels": {"suite": "unit", "k": "v"},
    "cwd": "/workspace/sub",
    "workspace": {"path": "/srv/project", "mode": "ro"},
    "limits": {"wall_time": "10m", "cpu_time": "5m", "kill_grace": "15s", "memory": "4g", "cpus": 1.5, "pids": 512},
    "network": "none",
    "policy": "build",
    "collect": {"junit": ["target/*.xml", "build/**/*.xml"], "classfiles": ["target/**/*.class", "out/*.class"],
                "coverage": ["site/jacoco.xml"], "tail_lines": 20}
  })"));
}

TEST(RunBody, EachCollectFlagAloneFillsOnlyItsField) {
  EXPECT_EQ(body_for({"--tail-lines", "0"})["collect"], json::parse(R"({"tail_lines": 0})"));
  EXPECT_EQ(body_for({"--collect-coverage", "cov.xml"})["collect"], json::parse(R"({"coverage": ["cov.xml"]})"));
  EXPECT_EQ(body_for({"--collect-classfiles", "*.class"})["collect"], json::parse(R"({"classfiles": ["*.class"]})"));
  EXPECT_FALSE(body_for({}).contains("collect"));
}

TEST(RunBody, RelativeWorkspaceBecomesAbsolute) {
  const json body = body_for({"-W", "some/dir/../proj"});
  EXPECT_EQ(body["workspace"]["path"], (fs::current_path() / "some/proj").string());
  EXPECT_FALSE(body["workspace"].contains("mode"));
}

TEST(RunBody, BareEnvNameCopiesFromThisEnvironmentOrIsSkipped) {
  ::setenv("CAPSULE_TEST_COPIED", "from here", 1);
  ::unsetenv("CAPSULE_TEST_UNSET");
  const json body = body_for({"-e", "CAPSULE_TEST_COPIED", "-e", "CAPSULE_TEST_UNSET"});
  EXPECT_EQ(body["env"], json::parse(R"({"CAPSULE_TEST_COPIED": "from here"})"));
}

TEST(RunBody, StdinIsSentVerbatim) {
  RunOptions options;
  options.argv = {"cat"};
  options.stdin_data = "line\n";
  EXPECT_EQ(build_run_body(options)["stdin"], "line\n");
}

TEST(RunBody, BaselineAllowRemovedAndProtectTestConfig) {
  const json body = body_for({"--baseline", "r1", "--allow-removed", "--protect-test-config"});
  EXPECT_EQ(body["baseline"], json({{"run", "r1"}, {"allow_removed", true}}));
  EXPECT_EQ(body["protect_test_config"], true);
  EXPECT_EQ(body_for({"--baseline", "r1"})["baseline"], json({{"run", "r1"}, {"allow_removed", false}}));
  EXPECT_THROW(body_for({"--allow-removed"}), std::invalid_argument) << "nothing to allow removals against";
}

TEST(RunBody, MalformedFlagsAreRejectedWithTheFlagName) {
  try {
    body_for({"--label", "novalue"});
    FAIL() << "accepted a label without =";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "--label 'novalue': expected KEY=VALUE");
  }
  EXPECT_THROW(body_for({"--env", "=x"}), std::invalid_argument);
  EXPECT_THROW(body_for({"--mode", "rw"}), std::invalid_argument);
  EXPECT_THROW(build_run_body(RunOptions{}), std::invalid_argument);
  EXPECT_THROW(body_for({"--cpus", "many"}), CLI::ParseError);
  EXPECT_THROW(body_for({"--tail-lines", "many"}), CLI::ParseError);
}

// ---------------------------------------------------------------------------------------------------------
// The flag table: capsule-launch registers a subset of the rows, so a letter cannot mean two things.

TEST(RunFlags, ShortLettersMeanTheSameInRunAndLaunch) {
  const std::initializer_list<RunFlag> launch = {RunFlag::kWorkspace, RunFlag::kWorkdir, RunFlag::kTimeout,
                                                 RunFlag::kCpuTime,   RunFlag::kMemory,  RunFlag::kCpus,
                                                 RunFlag::kPids,      RunFlag::kEnv};
  const std::vector<std::string> args = {"-W", "/srv/p", "-w", "/workspace/sub", "-m", "1g", "-e", "A=1"};
  for (const RunOptions& options : {parse(args), parse(args, launch)}) {
    EXPECT_EQ(options.workspace, "/srv/p");
    EXPECT_EQ(options.workdir, "/workspace/sub");
    EXPECT_EQ(options.memory, "1g");
    EXPECT_EQ(options.env, std::vector<std::string>{"A=1"});
  }
}

TEST(RunFlags, ASubsetRegistersOnlyItsRows) {
  EXPECT_EQ(parse({"--timeout", "5s"}, {RunFlag::kTimeout}).timeout, "5s");
  EXPECT_THROW(parse({"-l", "k=v"}, {RunFlag::kTimeout}), CLI::ParseError);
  EXPECT_THROW(parse({"--mode", "rw"}, {RunFlag::kWorkspace}), CLI::ParseError);
  EXPECT_EQ(parse({"-l", "k=v", "-t", "python=3.11", "-i", "-d"}).labels, std::vector<std::string>{"k=v"});
}

TEST(RunFlags, EnvAssignmentsKeepOrderAndCopyBareNames) {
  ::setenv("CAPSULE_TEST_ENV_COPY", "copied", 1);
  ::unsetenv("CAPSULE_TEST_ENV_UNSET");
  const auto pairs = env_assignments({"B=2", "CAPSULE_TEST_ENV_COPY", "CAPSULE_TEST_ENV_UNSET", "A=x=y"});
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"B", "2"}, {"CAPSULE_TEST_ENV_COPY", "copied"}, {"A", "x=y"}};
  EXPECT_EQ(pairs, expected);
  EXPECT_THROW(env_assignments({""}), std::invalid_argument);
}

TEST(RunFlags, AbsoluteDirIsNormalizedWithoutTrailingSlash) {
  EXPECT_EQ(absolute_path("/srv/a/../b/"), "/srv/b");
  EXPECT_EQ(absolute_path("/"), "/");
  EXPECT_EQ(absolute_path("rel"), (fs::current_path() / "rel").string());
}

}  // namespace
}  // namespace capsule::client

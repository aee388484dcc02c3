// Tests of client/run_view: the one exit-status rule of `capsule run` and capsule-launch (every branch, from a
// run object and from a sandbox Result), the summary line and the `runs ls` table.
#include <gtest/gtest.h>

#include <algorithm>

#include "client/run_view.h"

namespace capsule::client {
namespace {

using nlohmann::json;

json finished(const std::string& state, int exit_code, int signal = 0) {
  return {{"id", "3f2a9c"}, {"state", state},
          {"result", {{"exit_code", exit_code}, {"signal", signal}, {"wall_ms", 1234}}}};
}

TEST(ExitCode, TheCommandsOwnStatusWhenItExited) {
  EXPECT_EQ(exit_code_for(finished("succeeded", 0)), 0);
  EXPECT_EQ(exit_code_for(finished("failed", 3)), 3);
  EXPECT_EQ(exit_code_for(finished("failed", 255)), 255);
  EXPECT_EQ(exit_code_for(finished("failed", 0)), 1) << "a failed run never exits 0";
}

TEST(ExitCode, AFailedBaselineCheckOrAProtectViolationTurnsExitZeroInto123) {
  json run = finished("succeeded", 0);
  run["baseline"] = {{"run", "r0"}, {"verdict", "regressed"}, {"removed", {{"count", 202}}},
                     {"newly_skipped", {{"count", 0}}}};
  EXPECT_EQ(exit_code_for(run), kExitVerdictFailed);
  EXPECT_NE(summary_line(run).find("; baseline r0 regressed: 202 removed, 0 newly skipped"), std::string::npos)
      << summary_line(run);
  run["baseline"]["verdict"] = "passed";
  EXPECT_EQ(exit_code_for(run), 0);
  run["protect_violations"] = json::array({{{"path", "conftest.py"}, {"reason", "added"}}});
  EXPECT_EQ(exit_code_for(run), kExitVerdictFailed);
  EXPECT_NE(summary_line(run).find("1 protect violation"), std::string::npos) << summary_line(run);
  json failed = finished("failed", 2);
  failed["protect_violations"] = run["protect_violations"];
  EXPECT_EQ(exit_code_for(failed), 2) << "the command's own failure says more";
}

TEST(ExitCode, SignalNIs128PlusN) {
  EXPECT_EQ(exit_code_for(finished("signaled", 0, 9)), 137);
  EXPECT_EQ(exit_code_for(finished("signaled", 0, 11)), 139);
  EXPECT_EQ(exit_code_for(finished("signaled", 0, 127)), 255);
  EXPECT_EQ(exit_code_for(finished("signaled", 0, 0)), kExitCapsuleFailed) << "no signal recorded";
  EXPECT_EQ(exit_code_for(finished("signaled", 0, 128)), kExitCapsuleFailed) << "not a signal";
}

TEST(ExitCode, FixedCodesForTimeoutKillAndCapsuleFailures) {
  EXPECT_EQ(exit_code_for(finished("timed_out", 0, 9)), 124);
  EXPECT_EQ(exit_code_for(finished("idle_timed_out", 0, 9)), 124);
  EXPECT_EQ(exit_code_for(finished("oom_killed", 0, 9)), 137);
  EXPECT_EQ(exit_code_for(finished("cancelled", 0, 15)), 137);
  EXPECT_EQ(exit_code_for(finished("setup_failed", 1)), 125);
  EXPECT_EQ(exit_code_for(finished("internal_error", 0)), 125);
  EXPECT_EQ(exit_code_for(finished("interrupted", 0)), 125);
  EXPECT_EQ(exit_code_for(finished("a_state_from_the_future", 0)), 125);
  EXPECT_EQ(exit_code_for(json{{"state", "setup_failed"}, {"result", nullptr}}), 125);
  EXPECT_EQ(exit_code_for(json::object()), 125);
}

TEST(ExitCode, CannotExecuteAndNotFoundPassThroughFromSetup) {
  EXPECT_EQ(exit_code_for(finished("setup_failed", 126)), 126);
  EXPECT_EQ(exit_code_for(finished("setup_failed", 127)), 127);
}

TEST(ExitCode, OutputNotRelayedWholeIs125WhateverTheRunDid) {
  for (const std::string state : {"succeeded", "failed", "timed_out", "signaled"}) {
    RunEnding ending = ending_of(finished(state, 3, 9));
    ASSERT_NE(exit_code_for(ending), 125) << state;
    ending.bytes_not_relayed = 1;
    EXPECT_EQ(exit_code_for(ending), 125) << state;
  }
}

// capsule-launch reads its sandbox Result with the same rule as `capsule run` reads a run of that status.
TEST(ExitCode, ASandboxResultExitsAsARunWithItsStatus) {
  using sandbox::Status;
  const struct {
    Status status;
    int exit_code, signal, expected;
  } cases[] = {{Status::kSucceeded, 0, 0, 0},      {Status::kFailed, 2, 0, 2},       {Status::kTimedOut, -1, 9, 124},
               {Status::kOomKilled, -1, 9, 137},   {Status::kSignaled, -1, 6, 134},  {Status::kCancelled, -1, 15, 137},
               {Status::kSetupFailed, 127, 0, 127}, {Status::kSetupFailed, -1, 0, 125}, {Status::kInternalError, -1, 0, 125}};
  for (const auto& c : cases) {
    sandbox::Result result;
    result.status = c.status;
    result.exit_code = c.exit_code;
    result.signal = c.signal;
    const RunEnding ending = ending_of(result);
    EXPECT_EQ(ending.state, sandbox::status_name(c.status));
    EXPECT_EQ(exit_code_for(ending), c.expected) << ending.state;
    EXPECT_EQ(exit_code_for(finished(ending.state, c.exit_code, c.signal)), c.expected) << ending.state;
  }
}

TEST(Summary, OneLineWithStateTimeAndExit) {
  EXPECT_EQ(summary_line(finished("succeeded", 0)), "capsule: run 3f2a9c succeeded in 1.23 s (exit 0)");
  json timed_out = finished("timed_out", 0, 9);
  timed_out["result"]["reason"] = "wall time limit of 1s reached";
  EXPECT_EQ(summary_line(timed_out), "capsule: run 3f2a9c timed_out in 1.23 s: wall time limit of 1s reached (exit 124)");
  json tested = finished("failed", 1);
  tested["result"]["reason"] = "exited with status 1";
  tested["tests"] = {{"total", 12}, {"failed", 2}, {"errors", 1}, {"skipped", 0}};
  EXPECT_EQ(summary_line(tested),
            "capsule: run 3f2a9c failed in 1.23 s (exit 1; tests: 12 total, 2 failed, 1 errors, 0 skipped)");
}

TEST(Summary, HowCapsuledEndedTheCommand) {
  json killed = finished("timed_out", -1, 9);
  killed["result"]["termination"] = {{"reason", "wall_time"}, {"sent", {"TERM", "KILL"}}, {"kill_after_ms", 5003.2}};
  EXPECT_EQ(summary_line(killed),
            "capsule: run 3f2a9c timed_out in 1.23 s (exit 124; wall_time: TERM, KILL after 5.00 s, signal 9)");
  json cancelled = finished("cancelled", -1, 15);
  cancelled["result"]["termination"] = {{"reason", "cancelled"}, {"sent", {"TERM"}}};
  EXPECT_EQ(summary_line(cancelled), "capsule: run 3f2a9c cancelled in 1.23 s (exit 137; cancelled: TERM, signal 15)");
  json exited = finished("succeeded", 0);
  exited["result"]["termination"] = nullptr;
  EXPECT_EQ(summary_line(exited), "capsule: run 3f2a9c succeeded in 1.23 s (exit 0)");
}

TEST(Summary, TestsStateAndCompileErrorWhenNoTestWasCounted) {
  json broken = finished("failed", 1);
  broken["tests"] = {{"total", 0}, {"state", "not_run"}, {"compile_error", true}};
  EXPECT_EQ(summary_line(broken), "capsule: run 3f2a9c failed in 1.23 s (exit 1; tests: not_run, compile error)");
  json counted = finished("failed", 1);
  counted["tests"] = {{"total", 2}, {"failed", 1}, {"errors", 0}, {"skipped", 0}, {"state", "reports"},
                      {"compile_error", false}};
  EXPECT_EQ(summary_line(counted),
            "capsule: run 3f2a9c failed in 1.23 s (exit 1; tests: 2 total, 1 failed, 0 errors, 0 skipped)");
  json odd = finished("succeeded", 0);
  odd["tests"] = {{"compile_error", "yes"}};  // not a boolean: read as false, never thrown
  EXPECT_EQ(summary_line(odd), "capsule: run 3f2a9c succeeded in 1.23 s (exit 0)");
}

TEST(Summary, ClassFileMajorsMostCommonFirstAndCoveragePercentages) {
  json run = finished("succeeded", 0);
  run["classfiles"] = {{"majors", {{"52", 3}, {"61", 120}}}, {"expected", 61}};
  const auto counts = [](int covered, int total) { return json{{"covered", covered}, {"total", total}}; };
  run["coverage"] = {{"total", {{"lines", counts(8, 10)}, {"branches", counts(1, 4)}}}};
  EXPECT_EQ(summary_line(run),
            "capsule: run 3f2a9c succeeded in 1.23 s (exit 0; class files: major 61 x120, 52 x3; coverage: "
            "lines 80.0%, branches 25.0%)");
  run["classfiles"] = {{"majors", json::object()}, {"expected", nullptr}};
  run["coverage"] = {{"total", {{"lines", counts(0, 3)}, {"branches", counts(0, 0)}}}};
  EXPECT_EQ(summary_line(run), "capsule: run 3f2a9c succeeded in 1.23 s (exit 0; coverage: lines 0.0%)");
}

TEST(Summary, NotRelayedLinePointsAtTheLogs) {
  EXPECT_EQ(not_relayed_line("3f2a9c", 4096),
            "capsule: 4096 bytes of the command's output were not relayed (this client fell behind the command); "
            "`capsule runs logs 3f2a9c` has all of it");
}

TEST(RunsTable, AlignedColumnsWithRelativeAges) {
  const std::int64_t now = 1'700'000'000'000;
  json done = finished("failed", 3);
  done["times"] = {{"created", now - 90'000}};
  done["spec"] = {{"argv", {"sh", "-c", "echo hi; exit 3"}}};
  json running = {{"id", "77"}, {"state", "running"}, {"times", {{"created", now - 5'000}, {"started", now - 4'000}}},
                  {"spec", {{"argv", {"mvn", "-B", "clean", "verify", "-Dmaven.repo.local=/workspace/.m2/repository"}}}}};
  const std::string expected =
      "ID       STATE     EXIT   WALL    CREATED   COMMAND\n"
      "77       running   -      4.00s   5s ago    mvn -B clean verify -Dmaven.repo.local=/works...\n"
      "3f2a9c   failed    3      1.23s   1m ago    sh -c 'echo hi; exit 3'\n";
  EXPECT_EQ(format_runs_table(json::array({running, done}), now), expected);
  EXPECT_EQ(format_runs_table(json::array(), now), "ID   STATE   EXIT   WALL   CREATED   COMMAND\n");
}

TEST(RunsTable, AScriptExecOnOneLine) {
  const std::int64_t now = 1'700'000'000'000;
  json exec = finished("succeeded", 0);
  exec["times"] = {{"created", now}};
  exec["spec"] = {{"script", "cd src\nmake\x1b[2J"}, {"session", "s1"}};
  EXPECT_EQ(format_runs_table(json::array({exec}), now),
            "ID       STATE       EXIT   WALL    CREATED   COMMAND\n"
            "3f2a9c   succeeded   0      1.23s   0s ago    sh -c 'cd src\\nmake\\x1b[2J'\n");
}

TEST(RunsTable, AMultiLineCommandIsOneEscapedRowCutToTheColumn) {
  const std::int64_t now = 1'700'000'000'000;
  json run = finished("succeeded", 0);
  run["times"] = {{"created", now}};
  run["spec"] = {{"argv", {"python3", "-c", "import sys\nprint('héllo wörld, ünïcode')\r\nsys.exit(0)\n"}}};
  const std::string table = format_runs_table(json::array({run}), now);
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2) << table;  // the header and one row
  EXPECT_EQ(table,
            "ID       STATE       EXIT   WALL    CREATED   COMMAND\n"
            "3f2a9c   succeeded   0      1.23s   0s ago    python3 -c 'import sys\\nprint('\\''héllo wörld...\n");
}

TEST(OneLine, EscapesControlCharactersAndCutsWholeCharacters) {
  EXPECT_EQ(one_line("a\nb\tc\rd\x01\x7f"), "a\\nb\\tc\\rd\\x01\\x7f");
  EXPECT_EQ(one_line("plain", 5), "plain");
  EXPECT_EQ(one_line("abcdef", 5), "ab...");
  EXPECT_EQ(one_line("ééééé-é", 6), "ééé...");  // characters, not bytes: no é is split
}

TEST(Columns, EveryCellStaysOnItsRowAndUnicodeAligns) {
  EXPECT_EQ(format_columns({{"A", "B"}, {"x\ny", "1"}, {"é", "2"}}),
            "A      B\n"
            "x\\ny   1\n"
            "é      2\n");
}

}  // namespace
}  // namespace capsule::client

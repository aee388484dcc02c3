// The wall-time watchdog that survives the daemon: capsule-init ends a sandbox at its deadline even while
// capsuled is down (killed with -9), and the restarted daemon records the run as interrupted.
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

TEST_F(Capsuled, WallTimeIsEnforcedWhileTheDaemonIsDown) {
  start();
  // Ignores SIGTERM, so only the watchdog's SIGKILL after the grace can end it.
  const std::string id = submit(json{{"argv", {"sh", "-c", "trap '' TERM; sleep 600 & wait; sleep 600"}},
                                     {"limits", {{"wall_time", "2s"}, {"kill_grace", "1s"}}}});
  ASSERT_TRUE(eventually([&] { return sandbox_processes("sleep").size() == 1; })) << "the sleep should run";
  const std::vector<ProcessInfo> sandboxed = processes_in_cgroups_of(parent_);
  ASSERT_FALSE(sandboxed.empty());

  kill9();
  // Deadline 2 s + margin 1 s + grace 1 s; generous for a loaded machine, still far below the 600 s sleep.
  EXPECT_TRUE(eventually(
      [&] {
        for (const auto& process : sandboxed) {
          if (still_running(process)) return false;
        }
        return true;
      },
      60s))
      << "the sandbox outlived its wall time while capsuled was down";

  restart();
  const json run = get_run(id);
  EXPECT_EQ(run["state"], "interrupted") << run;
  EXPECT_EQ(health()["status"], "ok");
}

TEST_F(Capsuled, WatchdogLeavesTheTimeoutToALiveDaemon) {
  start();
  const json run = run_and_wait(json{{"argv", {"sleep", "600"}}, {"limits", {{"wall_time", "1s"}}}});
  EXPECT_EQ(run["state"], "timed_out") << run;
  EXPECT_EQ(run["result"]["signal"], 15) << "the daemon's SIGTERM ended it, not the watchdog's later one";
}

}  // namespace
}  // namespace capsule::testing

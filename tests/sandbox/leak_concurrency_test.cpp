// Resource hygiene and concurrency: 200 runs leave no process, mount, cgroup, scratch dir or fd behind,
// and 32 sandboxes launched at once from 8 threads all complete correctly.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>

#include <thread>

#include "sandbox/launcher.h"
#include "sandbox/quota.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

namespace fs = std::filesystem;

std::size_t count_entries(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return 0;
  std::size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
  return n;
}

std::size_t count_subdirs(const fs::path& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->is_directory()) ++n;
  }
  return n;
}

// Test-only cgroup parents are removed after use (in every v1 hierarchy, or the v2 tree).
void remove_cgroup_parent(const std::string& parent) {
  std::error_code ec;
  for (auto it = fs::directory_iterator("/sys/fs/cgroup", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    rmdir((it->path() / parent).c_str());
  }
  rmdir(("/sys/fs/cgroup/" + parent).c_str());
}

// Live children of this process (sandbox inits are direct children of the launching process).
std::size_t count_children() {
  std::size_t n = 0;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream file(task.path() / "children");
    for (std::string pid; file >> pid;) ++n;
  }
  return n;
}

struct Snapshot {
  std::size_t fds, mounts, cgroups, scratch, children;
  bool operator==(const Snapshot&) const = default;
};

Snapshot take(const std::string& cgroup_dir, const std::string& scratch) {
  // Mounts below this test's own scratch dir: the host's whole table changes with tests running alongside.
  return {count_entries("/proc/self/fd"), sandbox::mount_points_below(scratch).size(), count_entries(cgroup_dir),
          count_entries(scratch), count_children()};
}

std::ostream& operator<<(std::ostream& os, const Snapshot& s) {
  return os << "fds=" << s.fds << " mounts=" << s.mounts << " cgroups=" << s.cgroups << " scratch=" << s.scratch
            << " children=" << s.children;
}

TEST(LeakTest, TwoHundredRunsLeaveNothingBehind) {
  LauncherOptions options;
  options.scratch_dir = "/tmp/capsule-test/leak-scratch-" + std::to_string(getpid());
  options.cgroup.parent = "capsule-leak-" + std::to_string(getpid());
  Launcher launcher(options);
  const std::string cgroup_dir =
      launcher.cgroup_version() == 1 ? "/sys/fs/cgroup/pids/" + options.cgroup.parent
                                     : "/sys/fs/cgroup/" + options.cgroup.parent;
  // Warm-up creates the lazily made directories, so they are part of the baseline.
  ASSERT_EQ(launcher.run(testing::host_spec({"true"})).status, Status::kSucceeded);
  launcher.drain_teardown();  // run() leaves each box's teardown to the launcher's reaper
  Snapshot before = take(cgroup_dir, options.scratch_dir);
  int failures = 0;
  for (int i = 0; i < 200; ++i) {
    SandboxSpec spec = testing::host_spec({"/bin/sh", "-c", i % 10 == 0 ? "sleep 5" : "echo $0 >/dev/null; exit 1"});
    if (i % 10 == 0) spec.limits.wall_time = std::chrono::milliseconds(50);  // killed runs too
    if (i % 25 == 0) spec.argv = {"/no/such/binary"};                        // and setup failures
    Result r = launcher.run(spec);
    if (r.status == Status::kInternalError) ++failures;
  }
  EXPECT_EQ(failures, 0);
  launcher.drain_teardown();
  Snapshot after = take(cgroup_dir, options.scratch_dir);
  EXPECT_EQ(before, after) << "before: " << before << "\nafter:  " << after;
  std::error_code ec;
  fs::remove_all(options.scratch_dir, ec);
  remove_cgroup_parent(options.cgroup.parent);
}

TEST(ConcurrencyTest, ThirtyTwoSandboxesFromEightThreads) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(32);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4; ++i) {
        const int n = t * 4 + i;
        SandboxSpec spec = testing::host_spec({"/bin/sh", "-c", "sleep 0.2; echo sandbox-$N"});
        spec.env.push_back("N=" + std::to_string(n));
        Result r = testing::shared_launcher().run(spec);
        if (r.status == Status::kSucceeded && r.stdout_capture.head == "sandbox-" + std::to_string(n) + "\n") {
          ++ok;
        } else {
          errors[static_cast<std::size_t>(n)] = std::string(status_name(r.status)) + ": " + r.reason;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 32);
  for (const auto& e : errors) {
    if (!e.empty()) ADD_FAILURE() << e;
  }
}

}  // namespace
}  // namespace capsule::sandbox

namespace capsule::sandbox {
namespace {

// A launcher killed with its sandbox still running leaves a cgroup, a scratch dir and live processes;
// the next launcher on the same state removes all of them.
TEST(RecoveryTest, LeftoversOfAKilledLauncherAreRemoved) {
  LauncherOptions options;
  options.scratch_dir = "/tmp/capsule-test/recovery-scratch-" + std::to_string(getpid());
  options.cgroup.parent = "capsule-recovery-" + std::to_string(getpid());
  const std::string marker = "1000." + std::to_string(getpid()) + "7";
  pid_t launcher_process = fork();
  ASSERT_GE(launcher_process, 0);
  if (launcher_process == 0) {
    Launcher launcher(options);
    launcher.run(testing::host_spec({"sleep", marker}));
    _exit(0);
  }
  auto sleeper_alive = [&] { return !testing::processes_running({"sleep", marker}).empty(); };
  // However the test ends, nothing of it outlives it: the launcher, its sleeper, the scratch dir, the cgroups.
  struct RemoveLeftovers {
    pid_t launcher;
    const LauncherOptions& options;
    ~RemoveLeftovers() {
      kill(launcher, SIGKILL);
      waitpid(launcher, nullptr, 0);
      Launcher(options).remove_leftovers();
      std::error_code ec;
      fs::remove_all(options.scratch_dir, ec);
      remove_cgroup_parent(options.cgroup.parent);
    }
  } remove_leftovers{launcher_process, options};
  for (int i = 0; i < 100 && !sleeper_alive(); ++i) usleep(50000);
  ASSERT_TRUE(sleeper_alive());
  kill(launcher_process, SIGKILL);
  waitpid(launcher_process, nullptr, 0);
  ASSERT_TRUE(sleeper_alive());  // the sandbox outlived its launcher
  ASSERT_EQ(count_entries(options.scratch_dir), 1u);

  Launcher next(options);
  EXPECT_EQ(next.remove_leftovers(), 1u);
  EXPECT_FALSE(sleeper_alive());
  EXPECT_EQ(count_entries(options.scratch_dir), 0u);
  const std::string cgroup_dir = next.cgroup_version() == 1 ? "/sys/fs/cgroup/pids/" + options.cgroup.parent
                                                            : "/sys/fs/cgroup/" + options.cgroup.parent;
  EXPECT_EQ(count_subdirs(cgroup_dir), 0u);
}

}  // namespace
}  // namespace capsule::sandbox

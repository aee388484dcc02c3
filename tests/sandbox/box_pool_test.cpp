// The box pool (sandbox/box_pool.h): a box made ahead is used by one run only, cannot be told from a fresh one
// from inside, holds nothing of another run, and leaves no process, cgroup or scratch entry when let go.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "sandbox/box_pool.h"
#include "sandbox/launcher.h"
#include "sandbox/seccomp.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A launcher of its own (scratch dir, cgroup parent) with a pool, removed with everything it made.
class PooledLauncher {
 public:
  explicit PooledLauncher(const std::string& name, PoolOptions pool = {1, 4, std::chrono::minutes(10)}) {
    options_.scratch_dir = "/tmp/capsule-test/pool-" + name + "-" + std::to_string(getpid());
    options_.cgroup.parent = "capsule-pool-" + name + "-" + std::to_string(getpid());
    options_.pool = pool;
    launcher_ = std::make_unique<Launcher>(options_);
  }
  ~PooledLauncher() {
    launcher_->remove_cgroup_parent();
    launcher_.reset();
    std::error_code ec;
    fs::remove_all(options_.scratch_dir, ec);
  }
  Launcher& operator*() { return *launcher_; }
  Launcher* operator->() { return launcher_.get(); }
  const LauncherOptions& options() const { return options_; }
  // Waits (10 s at most) until the pool has made `count` boxes.
  bool await_made(std::uint64_t count) {
    for (int i = 0; i < 1000 && launcher_->pool_stats().made < count; ++i) std::this_thread::sleep_for(10ms);
    return launcher_->pool_stats().made >= count;
  }
  // The cgroup parent in the pids hierarchy (v1) or the tree (v2).
  std::string cgroup_dir() const {
    return launcher_->cgroup_version() == 1 ? "/sys/fs/cgroup/pids/" + options_.cgroup.parent
                                            : "/sys/fs/cgroup/" + options_.cgroup.parent;
  }

 private:
  LauncherOptions options_;
  std::unique_ptr<Launcher> launcher_;
};

using capsule::testing::describe;

SandboxSpec sh(const std::string& script) {
  SandboxSpec spec = testing::host_spec({"/bin/sh", "-c", script});
  spec.limits.memory_bytes = 256ull << 20;
  spec.limits.pids = 64;
  return spec;
}

// What a command sees of its box, with what differs between any two boxes (mount ids, the box's scratch paths
// in overlay options, cgroup names) left out: mount points, types and options, its pid, ids, capabilities,
// seccomp and no_new_privs, hostname, /tmp, network interfaces, rlimits, the cgroup limits it can read.
const char* kProbe = R"(
echo "pid $$"; id; hostname; cat /proc/sys/kernel/hostname
grep -E '^(Cap|Seccomp|NoNewPrivs)' /proc/self/status
awk '{ print $5, $6, $(NF-2) }' /proc/self/mountinfo
ls -la /tmp /dev/shm | awk '{ print $1, $3, $4, $NF }'
awk -F: 'NR > 2 { print $1 }' /proc/net/dev | tr -d ' ' | sort
ulimit -a
for p in /proc/[0-9]*; do n=${p#/proc/}; [ "$n" -lt 10 ] && printf '%s ' "$n"; done; echo
cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory.max 2>/dev/null
env | sort
)";

TEST(BoxPool, APooledBoxCannotBeToldFromAFreshOne) {
  PooledLauncher launcher("same");
  Result fresh = launcher->run(sh(kProbe));
  ASSERT_EQ(fresh.status, Status::kSucceeded) << describe(fresh);
  EXPECT_FALSE(fresh.setup.pooled) << "the first run of an environment finds no box ready";
  ASSERT_TRUE(launcher.await_made(1));
  Result pooled = launcher->run(sh(kProbe));
  ASSERT_EQ(pooled.status, Status::kSucceeded) << describe(pooled);
  EXPECT_TRUE(pooled.setup.pooled) << "the second run takes the box made meanwhile";
  EXPECT_EQ(pooled.setup.clone_ms, 0) << "a pooled run's setup is its exec's only";
  EXPECT_GT(pooled.setup.total_ms, 0);
  EXPECT_EQ(pooled.stdout_capture.head, fresh.stdout_capture.head);
  EXPECT_NE(fresh.stdout_capture.head.find("pid 2\n"), std::string::npos) << fresh.stdout_capture.head;
  EXPECT_NE(fresh.stdout_capture.head.find("Seccomp:\t2"), std::string::npos) << fresh.stdout_capture.head;
  EXPECT_EQ(launcher->pool_stats().hits, 1u);
}

// The default profile is installed by the box's waiting standby before its run comes; a profile that inspects a
// call the standby still makes (here setresuid's first argument) is installed by the exec, last. Either way the
// pooled run is filtered as the fresh one is, and its own calls (ids, rlimits, chdir) still work.
TEST(BoxPool, APooledBoxEnforcesItsProfileWhetherItsStandbyInstalledItOrNot) {
  const std::string inspecting = R"({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
      {"names": ["add_key"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
      {"names": ["setresuid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13,
       "args": [{"index": 0, "value": 4242, "op": "SCMP_CMP_EQ"}]}]})";
  ASSERT_FALSE(allows_calls(compile_seccomp(parse_seccomp_profile(inspecting)),
                            {ExpectedCall{static_cast<long>(SYS_setresuid), {}}}));
  for (const std::string& profile : {testing::default_seccomp_profile(), inspecting}) {
    PooledLauncher launcher("seccomp");
    const std::string script = "grep -E '^(Seccomp|NoNewPrivs)' /proc/self/status; /opt/testcases/add_key; "
                               "cd /tmp && pwd && ulimit -n";
    SandboxSpec spec = sh(script);
    spec.seccomp_profile = profile;
    spec.uid = 1000;
    spec.gid = 1000;
    Result fresh = launcher->run(spec);
    ASSERT_EQ(fresh.status, Status::kSucceeded) << describe(fresh);
    ASSERT_TRUE(launcher.await_made(1));
    Result pooled = launcher->run(spec);
    ASSERT_EQ(pooled.status, Status::kSucceeded) << describe(pooled);
    EXPECT_TRUE(pooled.setup.pooled);
    EXPECT_EQ(pooled.stdout_capture.head, fresh.stdout_capture.head);
    const std::string filtered = "NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\nadd_key: errno=EPERM\n/tmp\n";
    EXPECT_NE(pooled.stdout_capture.head.find(filtered), std::string::npos)
        << pooled.stdout_capture.head;
  }
}

TEST(BoxPool, ABoxServesOneRunAndHoldsNothingOfAnother) {
  PooledLauncher launcher("once");
  const std::string look = "ls -A /tmp /var/tmp /dev/shm; cat /proc/sys/kernel/random/boot_id >/dev/null; ";
  const std::string leave = "echo secret > /tmp/left; echo secret > /var/tmp/left; echo secret > /dev/shm/left; "
                            "(sleep 30 &) ; ";
  ASSERT_EQ(launcher->run(sh(leave)).status, Status::kSucceeded);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(launcher.await_made(static_cast<std::uint64_t>(i + 1)));
    Result r = launcher->run(sh(look + "echo; cat /proc/[0-9]*/comm | grep -c sleep; " + leave));
    ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
    EXPECT_TRUE(r.setup.pooled);
    EXPECT_EQ(r.stdout_capture.head, "/dev/shm:\n\n/tmp:\n\n/var/tmp:\n\n0\n")
        << "run " << i << " saw another run's files or processes";
  }
  EXPECT_EQ(launcher->pool_stats().hits, 3u);
}

TEST(BoxPool, OnlyEnvironmentsWithoutPerRunPartsArePooled) {
  const EnvironmentSpec plain = environment_of(sh("true"));
  EXPECT_TRUE(poolable(plain));
  EnvironmentSpec e = plain;
  e.overlays.push_back(OverlayMount{{"/tmp"}, "/tmp/u", "/tmp/w", "/workspace"});
  EXPECT_FALSE(poolable(e)) << "a copy-on-write workspace is the run's own";
  e = plain;
  e.upper_dir = "/tmp/upper";
  EXPECT_FALSE(poolable(e));
  e = plain;
  e.mounts.push_back(BindMount{"/tmp", "/workspace", false, true});
  EXPECT_FALSE(poolable(e)) << "a writable bind";
  e = plain;
  e.loopback_listeners = {3128};
  EXPECT_FALSE(poolable(e)) << "listeners belong to the run's proxy";
  e = plain;
  e.protect = {"**/*.java"};
  EXPECT_FALSE(poolable(e)) << "protected paths are matched when the box is made";
  e = plain;
  e.session = true;
  EXPECT_TRUE(poolable(e)) << "a session's box, kept apart from one-shot boxes";
  EXPECT_FALSE(e == plain);

  PooledLauncher launcher("rw");
  SandboxSpec rw = sh("true");
  rw.mounts.push_back(BindMount{launcher.options().scratch_dir, "/workspace", false, true});
  for (int i = 0; i < 2; ++i) {
    Result r = launcher->run(rw);
    ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
    EXPECT_FALSE(r.setup.pooled);
  }
  EXPECT_EQ(launcher->pool_stats().made, 0u);
  EXPECT_EQ(launcher->pool_stats().misses, 0u) << "not even counted as wanted";
}

// A harness removes its workspace and clones it again at the same path between two runs: a box made before
// binds the old directory, so it is let go and the run gets one that binds the new one.
TEST(BoxPool, ABoxBindingAReplacedDirectoryIsNotUsed) {
  PooledLauncher launcher("stale");
  const fs::path workspace = fs::path(launcher.options().scratch_dir + "-ws");
  fs::create_directories(workspace);
  std::ofstream(workspace / "version") << "first\n";
  SandboxSpec spec = sh("cat /workspace/version");
  spec.mounts.push_back(BindMount{workspace.string(), "/workspace", true, true});
  Result first = launcher->run(spec);
  ASSERT_EQ(first.status, Status::kSucceeded) << describe(first);
  ASSERT_TRUE(launcher.await_made(1));
  fs::remove_all(workspace);
  fs::create_directories(workspace);
  std::ofstream(workspace / "version") << "second\n";
  Result second = launcher->run(spec);
  ASSERT_EQ(second.status, Status::kSucceeded) << describe(second);
  EXPECT_EQ(second.stdout_capture.head, "second\n");
  EXPECT_FALSE(second.setup.pooled);
  EXPECT_EQ(launcher->pool_stats().stale, 1u);
  ASSERT_TRUE(launcher.await_made(2));
  Result third = launcher->run(spec);
  EXPECT_TRUE(third.setup.pooled) << "a box made after the change is used";
  EXPECT_EQ(third.stdout_capture.head, "second\n");
  fs::remove_all(workspace);
}

// Subdirectories: boxes' cgroups below a parent, boxes' scratch dirs.
std::size_t subdirectories(const std::string& dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->is_directory()) ++n;
  }
  return n;
}

TEST(BoxPool, IdleEnvironmentsAreLetGoAndStoppingLeavesNothing) {
  PooledLauncher launcher("ttl", PoolOptions{2, 4, 300ms});
  ASSERT_EQ(launcher->run(sh("true")).status, Status::kSucceeded);
  ASSERT_TRUE(launcher.await_made(1));
  for (int i = 0; i < 500 && launcher->pool_stats().expired == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(launcher->pool_stats().expired, 1u) << "an environment not asked for within the TTL is let go";
  launcher->drain_teardown();
  EXPECT_EQ(subdirectories(launcher.cgroup_dir()), 0u) << "no box cgroup is left once the idle boxes are gone";

  PooledLauncher busy("stop", PoolOptions{2, 4, std::chrono::minutes(10)});
  ASSERT_EQ(busy->run(sh("true")).status, Status::kSucceeded);
  ASSERT_TRUE(busy.await_made(2));
  const std::string cgroups = busy.cgroup_dir();
  EXPECT_GE(subdirectories(cgroups), 2u);
  busy->remove_cgroup_parent();
  EXPECT_FALSE(fs::exists(cgroups)) << "the pool's boxes are gone with the parent";
  EXPECT_EQ(subdirectories(busy.options().scratch_dir), 0u);
}

// The pool yields to starts in flight (sandbox/start_gate.h), but only for a while: a long run does not keep
// the next box from being made.
TEST(BoxPool, ARunInFlightDelaysTheNextBoxButDoesNotStopIt) {
  PooledLauncher launcher("gate", PoolOptions{1, 4, std::chrono::minutes(10)});
  ASSERT_EQ(launcher->run(sh("true")).status, Status::kSucceeded);  // a miss: the environment is wanted now
  ASSERT_TRUE(launcher.await_made(1));
  std::atomic<bool> cancel{false};
  RunHooks hooks;
  hooks.cancel = &cancel;
  Result long_run;
  std::thread runner([&] { long_run = launcher->run(sh("sleep 600"), hooks); });
  const bool made_meanwhile = launcher.await_made(2);
  cancel = true;
  runner.join();
  EXPECT_TRUE(made_meanwhile) << "a box was made while the run held its ticket";
  EXPECT_EQ(long_run.status, Status::kCancelled) << describe(long_run);
  EXPECT_GE(launcher->pool_stats().hits, 1u) << "the long run took the box made ahead";
}

// A daemon that dies with boxes waiting in its pool: each box's init sees its channel close and ends, so no
// process is left; the next launcher on the same state removes the rest.
TEST(BoxPool, WaitingBoxesEndWhenTheirLauncherDies) {
  LauncherOptions options;
  options.scratch_dir = "/tmp/capsule-test/pool-crash-" + std::to_string(getpid());
  options.cgroup.parent = "capsule-pool-crash-" + std::to_string(getpid());
  options.pool = PoolOptions{2, 4, std::chrono::minutes(10)};
  int ready_pipe[2];
  ASSERT_EQ(pipe(ready_pipe), 0);
  const pid_t daemon = fork();
  ASSERT_GE(daemon, 0);
  if (daemon == 0) {
    close(ready_pipe[0]);
    Launcher launcher(options);
    launcher.run(sh("true"));
    launcher.drain_teardown();  // the run's own box is gone before the walk below counts the waiting ones
    for (int i = 0; i < 1000 && launcher.pool_stats().made < 2; ++i) std::this_thread::sleep_for(10ms);
    const char made = launcher.pool_stats().made >= 2 ? 'y' : 'n';
    if (write(ready_pipe[1], &made, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  close(ready_pipe[1]);
  char made = 0;
  ASSERT_EQ(read(ready_pipe[0], &made, 1), 1);
  close(ready_pipe[0]);
  EXPECT_EQ(made, 'y');
  const std::string procs_root =
      (fs::exists("/sys/fs/cgroup/pids") ? "/sys/fs/cgroup/pids/" : "/sys/fs/cgroup/") + options.cgroup.parent;
  // A walk that meets a cgroup being removed (the first run's box, reaped in the background) ends with an error
  // part-way; it is walked again rather than counted short.
  auto live_processes = [&] {
    std::size_t n = 0;
    for (int attempt = 0; attempt < 100; ++attempt) {
      n = 0;
      std::error_code ec;
      for (auto it = fs::recursive_directory_iterator(procs_root, ec); !ec && it != fs::recursive_directory_iterator();
           it.increment(ec)) {
        if (it->path().filename() != "cgroup.procs") continue;
        std::ifstream procs(it->path());
        std::string pid;
        while (procs >> pid) ++n;
      }
      if (!ec || !fs::exists(procs_root)) break;
    }
    return n;
  };
  EXPECT_GE(live_processes(), 2u) << "init and a standby child in each waiting box";
  kill(daemon, SIGKILL);
  int status = 0;
  waitpid(daemon, &status, 0);
  std::size_t left = live_processes();
  for (int i = 0; i < 1000 && left != 0; ++i) {
    std::this_thread::sleep_for(10ms);
    left = live_processes();
  }
  EXPECT_EQ(left, 0u) << "a waiting box outlived its launcher";
  LauncherOptions unpooled = options;
  unpooled.pool = PoolOptions{};
  Launcher next(unpooled);
  EXPECT_GE(next.remove_leftovers(), 2u);
  next.remove_cgroup_parent();
  std::error_code ec;
  fs::remove_all(options.scratch_dir, ec);
}

}  // namespace
}  // namespace capsule::sandbox

// cgroup v2 back end, tested against the fake cgroupfs tree (this host's cgroup2 mount has no controllers),
// plus a replay of the same file operations on the real cgroup2 mount that keeps the fake faithful.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <fstream>
#include <thread>

#include "sandbox/cgroup.h"
#include "sandbox/cgroup_fs.h"
#include "sandbox/error.h"
#include "tests/sandbox/fake_cgroupfs.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using capsule::testing::FakeCgroupFs;
using capsule::testing::FakeKernel;
using namespace std::chrono_literals;

constexpr const char* kRoot = "/fake/cgroup";
using capsule::testing::kMiB;

template <class Fn>
base::Cause error_of(Fn&& fn) {
  try {
    fn();
  } catch (const SandboxError& error) {
    return error.cause();
  }
  ADD_FAILURE() << "expected a SandboxError";
  return {};
}

class CgroupV2Test : public ::testing::Test {
 protected:
  void SetUp() override { use({}); }

  void use(FakeKernel kernel, const std::string& parent = "capsule") {
    fs_ = std::make_shared<FakeCgroupFs>(kRoot, std::move(kernel));
    manager_ = make_cgroup_v2(config(parent), fs_);
  }
  static CgroupConfig config(const std::string& parent = "capsule") {
    CgroupConfig config;
    config.mount_root = kRoot;
    config.parent = parent;
    config.kill_timeout = 200ms;
    return config;
  }
  static std::string path(const std::string& relative) { return std::string(kRoot) + "/" + relative; }
  std::string contents(const std::string& relative) const { return fs_->read(path(relative)); }

  std::shared_ptr<FakeCgroupFs> fs_;
  std::unique_ptr<CgroupManager> manager_;
};

TEST_F(CgroupV2Test, CreateWritesLimitsInKernelFormat) {
  auto group = manager_->create("run-1", {64 * kMiB, 100, 1.5});
  EXPECT_EQ(manager_->version(), 2);
  EXPECT_EQ(group->name(), "run-1");
  EXPECT_EQ(contents("capsule/run-1/memory.max"), "67108864\n");
  EXPECT_EQ(contents("capsule/run-1/memory.swap.max"), "0\n");
  EXPECT_EQ(contents("capsule/run-1/pids.max"), "100\n");
  EXPECT_EQ(contents("capsule/run-1/cpu.max"), "150000 100000\n");
  EXPECT_EQ(contents("cgroup.subtree_control"), "cpu memory pids\n");
  EXPECT_EQ(contents("capsule/cgroup.subtree_control"), "cpu memory pids\n");
  EXPECT_EQ(manager_->list(), std::vector<std::string>{"run-1"});
}

TEST_F(CgroupV2Test, TheBoxViewIsTheUnifiedHierarchyItself) {
  EXPECT_EQ(manager_->view_mounts(), (std::vector<CgroupViewMount>{{"cgroup2", "", "", {}}}));
}

// A limited box's init moves itself into the "init" leaf (after entering its cgroup namespace); the box then
// enables its controllers below itself and every exec leaf, made before or after, carries the box's limits.
TEST_F(CgroupV2Test, ALimitedBoxHandsItsLimitsToEachExecLeafOnceInitHasLeft) {
  fs_->spawn(101, kRoot);
  auto group = manager_->create("run", {64 * kMiB, 100, 1.5});
  EXPECT_EQ(group->init_leaf_procs_file(), path("capsule/run/init/cgroup.procs"));
  group->add_process(101);
  auto early = group->create_child("exec-1");
  EXPECT_FALSE(fs_->exists(path("capsule/run/exec-1/memory.max")));  // nothing enabled below the box yet
  // Init still in the box's own directory: the kernel refuses controllers below it.
  EXPECT_EQ(error_of([&] { group->hand_limits_to_children(); }).path, path("capsule/run/cgroup.subtree_control"));
  fs_->write(group->init_leaf_procs_file(), "101");
  group->hand_limits_to_children();
  EXPECT_EQ(contents("capsule/run/cgroup.subtree_control"), "cpu memory pids\n");
  auto late = group->create_child("exec-2");
  for (const char* leaf : {"exec-1", "exec-2"}) {
    const std::string dir = std::string("capsule/run/") + leaf + "/";
    EXPECT_EQ(contents(dir + "memory.max"), "67108864\n") << leaf;
    EXPECT_EQ(contents(dir + "memory.swap.max"), "0\n") << leaf;
    EXPECT_EQ(contents(dir + "pids.max"), "100\n") << leaf;
    EXPECT_EQ(contents(dir + "cpu.max"), "150000 100000\n") << leaf;
  }
  EXPECT_EQ(contents("capsule/run/init/memory.max"), "max\n");  // init's leaf keeps no limits of its own
  group->hand_limits_to_children();                                // idempotent
  group->remove();
  EXPECT_FALSE(fs_->exists(path("capsule/run")));
}

// v2 counts an OOM kill in the leaf that hit its limit and in the box above it: one kill, not two.
TEST_F(CgroupV2Test, AnOomKillInALimitedExecLeafCountsOnce) {
  fs_->spawn(101, kRoot);
  auto group = manager_->create("run", {64 * kMiB, 0, 0});
  group->add_process(101);
  fs_->write(group->init_leaf_procs_file(), "101");
  group->hand_limits_to_children();
  auto leaf = group->create_child("exec-1");
  const std::uint64_t box_at_start = group->oom_kills();
  const std::string events = "low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\noom_group_kill 0\n";
  fs_->set_file(path("capsule/run/exec-1/memory.events"), events);
  fs_->set_file(path("capsule/run/memory.events"), events);
  EXPECT_EQ(exec_oom_kills(leaf->oom_kills(), group->oom_kills(), box_at_start), 1u);
  // v1 (or a v2 leaf without memory files): only one of the two counts it.
  EXPECT_EQ(exec_oom_kills(0, 1, 0), 1u);
  EXPECT_EQ(exec_oom_kills(1, 0, 0), 1u);
  EXPECT_EQ(exec_oom_kills(0, 3, 5), 0u);  // a counter that went back (a new box) is no kill
}

TEST_F(CgroupV2Test, AnUnlimitedBoxKeepsItsInitAndHandsNothingDown) {
  auto group = manager_->create("run", {});
  EXPECT_EQ(group->init_leaf_procs_file(), "");
  EXPECT_FALSE(fs_->exists(path("capsule/run/init")));
  group->hand_limits_to_children();
  EXPECT_EQ(contents("capsule/run/cgroup.subtree_control"), "");
}

TEST_F(CgroupV2Test, UnlimitedKeepsKernelDefaultsAndLeavesCpuAlone) {
  auto group = manager_->create("run", {});
  EXPECT_EQ(contents("capsule/run/memory.max"), "max\n");
  EXPECT_EQ(contents("capsule/run/memory.swap.max"), "max\n");
  EXPECT_EQ(contents("capsule/run/pids.max"), "max\n");
  EXPECT_FALSE(fs_->exists(path("capsule/run/cpu.max")));
  EXPECT_EQ(contents("capsule/cgroup.subtree_control"), "memory pids\n");
}

// With a weight the cpu controller is enabled down to the parent, whose cpu.weight is 100 per host process
// (at most 10000); the boxes keep the default 100 each, sharing the parent's weight equally.
TEST_F(CgroupV2Test, TheParentGetsACpuWeightInProportionToItsWeight) {
  CgroupConfig weighed = config("daemon/sandboxes");
  weighed.parent_cpu_weight = 6;
  manager_ = make_cgroup_v2(weighed, fs_);
  auto group = manager_->create("run", {kMiB, 0, 0});
  EXPECT_EQ(contents("daemon/sandboxes/cpu.weight"), "600\n");
  EXPECT_EQ(contents("daemon/cpu.weight"), "100\n") << "levels above the parent are shared and keep theirs";
  EXPECT_EQ(contents("daemon/sandboxes/run/cpu.weight"), "100\n");
  EXPECT_EQ(contents("daemon/sandboxes/run/memory.max"), "1048576\n");
  weighed.parent_cpu_weight = 1000;
  make_cgroup_v2(weighed, fs_)->create("run-2", {});
  EXPECT_EQ(contents("daemon/sandboxes/cpu.weight"), "10000\n") << "clamped to the kernel's range";
}

// Without a cpu controller to enable, a weight changes nothing and boxes are made as before.
TEST_F(CgroupV2Test, ACpuWeightWithoutTheCpuControllerIsLeftOut) {
  FakeKernel kernel;
  kernel.controllers = {"memory", "pids"};
  use(kernel);
  CgroupConfig weighed = config();
  weighed.parent_cpu_weight = 6;
  manager_ = make_cgroup_v2(weighed, fs_);
  EXPECT_NO_THROW(manager_->create("run", {kMiB, 0, 0}));
  EXPECT_FALSE(fs_->exists(path("capsule/cpu.weight")));
  EXPECT_EQ(contents("capsule/cgroup.subtree_control"), "memory pids\n");
}

TEST_F(CgroupV2Test, NestedParentEnablesControllersAtEveryLevel) {
  use({}, "daemon/sandboxes");
  auto group = manager_->create("run", {kMiB, 0, 0});
  for (const char* level : {"", "daemon/", "daemon/sandboxes/"})
    EXPECT_EQ(contents(std::string(level) + "cgroup.subtree_control"), "memory pids\n") << level;
  EXPECT_EQ(contents("daemon/sandboxes/run/memory.max"), "1048576\n");
}

TEST_F(CgroupV2Test, UnavailableControllerFailsBeforeCreatingAnything) {
  FakeKernel kernel;
  kernel.controllers = {"memory", "pids"};
  use(kernel);
  const base::Cause cause = error_of([&] { manager_->create("run", {0, 0, 2}); });
  EXPECT_EQ(cause.step, "cgroup");
  EXPECT_EQ(cause.path, path("cgroup.controllers"));
  EXPECT_NE(cause.describe().find("cpu controller is not available"), std::string::npos) << cause.describe();
  EXPECT_FALSE(fs_->exists(path("capsule")));
  EXPECT_EQ(contents("cgroup.subtree_control"), "");
  EXPECT_NO_THROW(manager_->create("run", {kMiB, 10, 0}));  // no cpu limit: no cpu controller needed
}

TEST_F(CgroupV2Test, MissingMemoryControllerFails) {
  FakeKernel kernel;
  kernel.controllers = {"cpu", "pids"};
  use(kernel);
  const base::Cause cause = error_of([&] { manager_->create("run", {}); });
  EXPECT_NE(cause.describe().find("memory controller is not available"), std::string::npos) << cause.describe();
  EXPECT_FALSE(fs_->exists(path("capsule")));
}

TEST_F(CgroupV2Test, LimitTheKernelRefusesRollsBack) {
  base::Cause cause = error_of([&] { manager_->create("run", {kMiB, 5'000'000, 0}); });
  EXPECT_EQ(cause.path, path("capsule/run/pids.max"));
  EXPECT_EQ(cause.errno_value, EINVAL);
  EXPECT_FALSE(fs_->exists(path("capsule/run")));

  cause = error_of([&] { manager_->create("run", {0, 0, 0.001}); });  // quota 100 us < 1 ms
  EXPECT_EQ(cause.path, path("capsule/run/cpu.max"));
  EXPECT_EQ(cause.errno_value, EINVAL);
  EXPECT_TRUE(manager_->list().empty());
}

TEST_F(CgroupV2Test, ParentWithProcessesIsExplained) {
  use({}, "busy");
  ASSERT_EQ(fs_->make_dir(path("busy")), 0);
  fs_->spawn(500, path("busy"));
  const base::Cause cause = error_of([&] { manager_->create("run", {}); });
  EXPECT_EQ(cause.errno_value, EBUSY);
  EXPECT_EQ(cause.path, path("busy/cgroup.subtree_control"));
  EXPECT_NE(cause.describe().find("leaf cgroup"), std::string::npos) << cause.describe();
  EXPECT_TRUE(manager_->list().empty());
}

TEST_F(CgroupV2Test, RejectsUnsafeNamesAndExistingGroups) {
  for (const char* name : {"", ".", "..", "a/b", ".hidden", "x y"}) {
    EXPECT_THROW(manager_->create(name, {}), SandboxError) << name;
    EXPECT_THROW(manager_->open(name), SandboxError) << name;
  }
  EXPECT_TRUE(manager_->list().empty());
  EXPECT_THROW(make_cgroup_v2(config("../escape"), fs_), SandboxError);

  auto group = manager_->create("run", {});
  EXPECT_EQ(error_of([&] { manager_->create("run", {}); }).errno_value, EEXIST);
  EXPECT_TRUE(fs_->exists(path("capsule/run")));  // the failed second create left the first alone
}

TEST_F(CgroupV2Test, AddProcessMovesItIntoTheGroup) {
  fs_->spawn(101, kRoot);
  fs_->spawn(102, kRoot);
  auto group = manager_->create("run", {});
  group->add_process(101);
  group->add_process(102);
  EXPECT_EQ(group->processes(), (std::vector<pid_t>{101, 102}));
  EXPECT_EQ(contents("cgroup.procs"), "");
  EXPECT_EQ(contents("capsule/run/cgroup.events"), "populated 1\nfrozen 0\n");
  const base::Cause cause = error_of([&] { group->add_process(999); });
  EXPECT_EQ(cause.errno_value, ESRCH);
  EXPECT_EQ(cause.path, path("capsule/run/cgroup.procs"));
}

TEST_F(CgroupV2Test, KillAllUsesCgroupKillForTheWholeSubtree) {
  auto group = manager_->create("run", {});
  fs_->spawn(101, path("capsule/run"));
  ASSERT_EQ(fs_->make_dir(path("capsule/run/inner")), 0);  // a sub-cgroup made inside the sandbox
  fs_->spawn(102, path("capsule/run/inner"));
  EXPECT_EQ(group->processes(), (std::vector<pid_t>{101, 102}));
  group->kill_all();
  EXPECT_FALSE(fs_->alive(101));
  EXPECT_FALSE(fs_->alive(102));
  EXPECT_TRUE(fs_->signals().empty());  // the kernel did it, no racy per-pid kill(2)
  EXPECT_EQ(contents("capsule/run/cgroup.events"), "populated 0\nfrozen 0\n");
}

TEST_F(CgroupV2Test, KillAllBeforeCgroupKillFreezesAndSignals) {
  FakeKernel kernel;
  kernel.missing_files = {"cgroup.kill"};
  use(kernel);
  auto group = manager_->create("run", {});
  fs_->spawn(101, path("capsule/run"));
  fs_->spawn(102, path("capsule/run"));
  group->kill_all();
  EXPECT_FALSE(fs_->alive(101));
  EXPECT_FALSE(fs_->alive(102));
  const std::vector<std::pair<pid_t, int>> expected{{101, SIGKILL}, {102, SIGKILL}};
  EXPECT_EQ(fs_->signals(), expected);
  const std::string freezer = path("capsule/run/cgroup.freeze");
  const std::vector<std::string> tail(fs_->journal().end() - 4, fs_->journal().end());
  const std::vector<std::string> frozen_kill_thaw{"write " + freezer + " 1", "signal 101 9", "signal 102 9",
                                                  "write " + freezer + " 0"};
  EXPECT_EQ(tail, frozen_kill_thaw);
  EXPECT_EQ(contents("capsule/run/cgroup.freeze"), "0\n");
}

TEST_F(CgroupV2Test, KillAllGivesUpOnAProcessThatWillNotDie) {
  auto group = manager_->create("run", {});
  fs_->spawn(101, path("capsule/run"));
  fs_->make_unkillable(101);
  const auto start = std::chrono::steady_clock::now();
  const base::Cause cause = error_of([&] { group->kill_all(); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(cause.path, path("capsule/run"));
  EXPECT_NE(cause.detail.find("still running after SIGKILL: 101"), std::string::npos) << cause.describe();
  EXPECT_THROW(group->remove(), SandboxError);
  EXPECT_TRUE(fs_->exists(path("capsule/run")));
}

TEST_F(CgroupV2Test, SignalAllReachesEveryMember) {
  auto group = manager_->create("run", {});
  fs_->spawn(101, path("capsule/run"));
  fs_->spawn(102, path("capsule/run"));
  group->signal_all(SIGTERM);
  const std::vector<std::pair<pid_t, int>> expected{{101, SIGTERM}, {102, SIGTERM}};
  EXPECT_EQ(fs_->signals(), expected);
}

TEST_F(CgroupV2Test, UsageParsesKernelCounters) {
  auto group = manager_->create("run", {});
  fs_->set_file(path("capsule/run/cpu.stat"), "usage_usec 3500\nuser_usec 2000\nsystem_usec 1500\nnice_usec 0\n");
  fs_->set_file(path("capsule/run/memory.peak"), "123456789\n");
  fs_->set_file(path("capsule/run/memory.events"), "low 0\nhigh 0\nmax 4\noom 3\noom_kill 2\noom_group_kill 0\n");
  const CgroupUsage usage = group->usage();
  EXPECT_EQ(usage.cpu_user_ns, 2'000'000u);
  EXPECT_EQ(usage.cpu_sys_ns, 1'500'000u);
  EXPECT_EQ(usage.peak_memory_bytes, 123456789u);
  EXPECT_EQ(usage.oom_kills, 2u);
}

TEST_F(CgroupV2Test, UsageWithoutMemoryPeakReportsZero) {
  FakeKernel kernel;
  kernel.missing_files = {"memory.peak"};
  use(kernel);
  auto group = manager_->create("run", {});
  fs_->set_file(path("capsule/run/cpu.stat"), "usage_usec 10\nuser_usec 7\nsystem_usec 3\n");
  const CgroupUsage usage = group->usage();
  EXPECT_EQ(usage.peak_memory_bytes, 0u);
  EXPECT_EQ(usage.cpu_user_ns, 7000u);
}

TEST_F(CgroupV2Test, RemoveKillsAndDeletesAndIsIdempotent) {
  auto group = manager_->create("run", {kMiB, 0, 0});
  fs_->spawn(101, path("capsule/run"));
  ASSERT_EQ(fs_->make_dir(path("capsule/run/inner")), 0);
  fs_->spawn(102, path("capsule/run/inner"));
  group->remove();
  EXPECT_FALSE(fs_->exists(path("capsule/run")));
  EXPECT_FALSE(fs_->alive(101));
  EXPECT_FALSE(fs_->alive(102));
  EXPECT_NO_THROW(group->remove());
  EXPECT_TRUE(group->processes().empty());
  EXPECT_TRUE(manager_->list().empty());
}

TEST_F(CgroupV2Test, DestroyingTheGroupRemovesIt) {
  {
    auto group = manager_->create("run", {});
    fs_->spawn(101, path("capsule/run"));
  }
  EXPECT_FALSE(fs_->exists(path("capsule/run")));
  EXPECT_FALSE(fs_->alive(101));
}

TEST_F(CgroupV2Test, RemoveParentOnlyWhenEmptyAndKeepsSharedLevels) {
  use({}, "capsule/daemon-a");
  auto group = manager_->create("run", {});
  manager_->remove_parent();  // a sandbox is still in it: the kernel refuses, nothing changes
  EXPECT_TRUE(fs_->exists(path("capsule/daemon-a/run")));
  group->remove();
  manager_->remove_parent();
  EXPECT_FALSE(fs_->exists(path("capsule/daemon-a")));
  EXPECT_TRUE(fs_->exists(path("capsule")));
  EXPECT_NO_THROW(manager_->remove_parent());
}

TEST_F(CgroupV2Test, ListAndOpenFindLeftoversOfACrashedDaemon) {
  ASSERT_EQ(fs_->make_dir(path("capsule")), 0);
  fs_->write(path("cgroup.subtree_control"), "+memory +pids");
  ASSERT_EQ(fs_->make_dir(path("capsule/old")), 0);
  fs_->spawn(300, path("capsule/old"));

  auto restarted = make_cgroup_v2(config(), fs_);
  EXPECT_EQ(restarted->list(), std::vector<std::string>{"old"});
  auto old = restarted->open("old");
  EXPECT_EQ(old->processes(), std::vector<pid_t>{300});
  old->remove();
  EXPECT_FALSE(fs_->alive(300));
  EXPECT_TRUE(restarted->list().empty());
  EXPECT_EQ(error_of([&] { restarted->open("old"); }).errno_value, ENOENT);
}

TEST_F(CgroupV2Test, ManagerNeedsACgroup2Root) {
  CgroupConfig other = config();
  other.mount_root = "/fake/elsewhere";
  EXPECT_THROW(make_cgroup_v2(other, fs_), SandboxError);
}

// --- detection, on fake trees ---

TEST(CgroupDetectTest, V2RootOfferingMemoryAndPidsIsV2) {
  auto fs = std::make_shared<FakeCgroupFs>(kRoot);
  CgroupConfig config;
  config.mount_root = kRoot;
  EXPECT_EQ(detect_cgroups(config, fs)->version(), 2);
}

TEST(CgroupDetectTest, CoMountedV1HierarchiesAreV1) {
  FakeKernel kernel;
  kernel.mountinfo =
      "30 22 0:27 / /fake/v1 rw,nosuid - tmpfs tmpfs rw,mode=755\n"
      "31 30 0:28 / /fake/v1/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
      "34 30 0:31 / /fake/v1/memory rw,nosuid shared:12 - cgroup cgroup rw,memory\n"
      "35 30 0:32 / /fake/v1/pids rw,nosuid shared:13 - cgroup cgroup rw,pids\n"
      "36 30 0:33 / /fake/v1/freezer rw,nosuid shared:14 - cgroup cgroup rw,freezer\n"
      "40 30 0:37 / /fake/v1/unified rw,nosuid shared:18 - cgroup2 cgroup2 rw,nsdelegate\n";
  auto fs = std::make_shared<FakeCgroupFs>("/fake/unified", kernel);
  CgroupConfig config;
  config.mount_root = "/fake/v1";
  EXPECT_EQ(detect_cgroups(config, fs)->version(), 1);
}

TEST(CgroupDetectTest, NeitherUsableIsAClearError) {
  FakeKernel kernel;
  kernel.controllers = {"cpu", "io"};
  auto fs = std::make_shared<FakeCgroupFs>(kRoot, kernel);
  CgroupConfig config;
  config.mount_root = kRoot;
  const base::Cause cause = error_of([&] { detect_cgroups(config, fs); });
  EXPECT_EQ(cause.path, kRoot);
  EXPECT_NE(cause.detail.find("lacks memory or pids"), std::string::npos) << cause.describe();
  EXPECT_NE(cause.detail.find("no cgroup v1"), std::string::npos) << cause.describe();
}

// --- the fake against the kernel ---

// The same script on the real cgroup2 mount and on a fake configured like it must give the same transcript.
std::vector<std::string> run_script(CgroupFs& fs, const std::string& root, const std::string& dir,
                                    const std::function<pid_t()>& spawn, pid_t absent_pid,
                                    const std::string& unavailable_controller) {
  std::vector<std::string> log;
  auto note = [&](const std::string& what, int err) { log.push_back(what + " -> " + std::to_string(err)); };
  auto write = [&](const std::string& file, const std::string& value) {
    int err = 0;
    try {
      fs.write(join_path(dir, file), value);
    } catch (const SandboxError& error) {
      err = error.cause().errno_value;
    }
    note("write " + file + " '" + value + "'", err);
  };
  auto events = [&](const std::string& at) { log.push_back("events " + fs.read(join_path(at, "cgroup.events"))); };

  note("mkdir", fs.make_dir(dir));
  note("mkdir again", fs.make_dir(dir));
  note("mkdir over a file", fs.make_dir(join_path(dir, "cgroup.procs")));
  note("mkdir without parent", fs.make_dir(join_path(dir, "x/y")));
  for (const char* file : {"cgroup.procs", "cgroup.events", "cgroup.kill", "cgroup.freeze", "cgroup.controllers",
                           "cgroup.subtree_control", "cgroup.type", "cgroup.threads", "cpu.stat"}) {
    log.push_back(std::string("has ") + file + " " + std::to_string(fs.exists(join_path(dir, file))));
    log.push_back(std::string("root has ") + file + " " + std::to_string(fs.exists(join_path(root, file))));
  }
  log.push_back("controllers " + fs.read(join_path(dir, "cgroup.controllers")));
  events(dir);
  log.push_back("freeze " + fs.read(join_path(dir, "cgroup.freeze")));
  write("cgroup.subtree_control", "+bogus");
  write("cgroup.subtree_control", "memory");
  if (!unavailable_controller.empty()) write("cgroup.subtree_control", "+" + unavailable_controller);
  write("cgroup.kill", "2");
  write("cgroup.kill", "x");
  write("cgroup.freeze", "2");
  write("cgroup.controllers", "x");
  write("cgroup.events", "1");
  write("cpu.stat", "1");
  write("cgroup.type", "foo");
  write("cgroup.max.depth", "abc");
  write("cgroup.procs", "abc");
  write("cgroup.procs", "-1");
  write("cgroup.procs", std::to_string(absent_pid));

  const pid_t pid = spawn();
  auto move = [&](const std::string& file) {
    int err = 0;
    try {
      fs.write(join_path(dir, file), std::to_string(pid));
    } catch (const SandboxError& error) {
      err = error.cause().errno_value;
    }
    note("move into " + file, err);
  };
  move("cgroup.procs");
  events(dir);
  log.push_back("procs " + std::to_string(split_words(fs.read(join_path(dir, "cgroup.procs"))).size()));
  note("rmdir populated", fs.remove_dir(dir));
  const std::string child = join_path(dir, "child");
  note("mkdir child", fs.make_dir(child));
  move("child/cgroup.procs");
  events(dir);
  events(child);
  auto wait_for = [&](const std::string& at, const std::string& line) {
    for (int i = 0; i < 200 && fs.read(join_path(at, "cgroup.events")).find(line) == std::string::npos; ++i)
      std::this_thread::sleep_for(10ms);
  };
  write("cgroup.freeze", "1");
  wait_for(child, "frozen 1");
  events(dir);
  events(child);
  log.push_back("freeze " + fs.read(join_path(dir, "cgroup.freeze")) + " child " +
                fs.read(join_path(child, "cgroup.freeze")));
  write("cgroup.freeze", "0");
  wait_for(child, "frozen 0");
  events(child);
  write("cgroup.kill", " 1 ");
  wait_for(dir, "populated 0");
  events(dir);
  note("rmdir with a child", fs.remove_dir(dir));
  note("rmdir file", fs.remove_dir(join_path(child, "cgroup.procs")));
  note("rmdir child", fs.remove_dir(child));
  note("rmdir", fs.remove_dir(dir));
  note("rmdir again", fs.remove_dir(dir));
  note("rmdir root", fs.remove_dir(root));
  return log;
}

std::string real_cgroup2_mount() {
  std::ifstream in(kMountInfoPath);
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<std::string> fields = split_words(line);
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (dash != fields.end() && dash + 1 != fields.end() && dash[1] == "cgroup2") return fields[4];
  }
  return "";
}

TEST(CgroupFakeTree, BehavesLikeTheKernelsCgroup2) {
  const std::string real_root = real_cgroup2_mount();
  if (real_root.empty() || ::geteuid() != 0) GTEST_SKIP() << "needs root and a cgroup2 mount";
  auto host = host_cgroup_fs();
  FakeKernel kernel;
  kernel.controllers = split_words(host->read(join_path(real_root, "cgroup.controllers")));
  kernel.root_subtree_control = split_words(host->read(join_path(real_root, "cgroup.subtree_control")));
  std::string unavailable;
  for (const char* controller : {"hugetlb", "rdma", "misc", "io", "cpuset", "cpu", "memory", "pids"})
    if (!contains(kernel.root_subtree_control, controller)) unavailable = controller;
  pid_t absent = 4'194'000;
  while (::kill(absent, 0) == 0 || errno != ESRCH) --absent;

  FakeCgroupFs fake("/fake/unified", kernel);
  const auto fake_log = run_script(fake, "/fake/unified", "/fake/unified/capsule-fidelity", [&] {
    fake.spawn(4242, "/fake/unified");
    return pid_t{4242};
  }, absent, unavailable);

  pid_t child = -1;
  const std::string dir = real_root + "/capsule-fidelity-" + std::to_string(::getpid());
  const auto real_log = run_script(*host, real_root, dir, [&] {
    child = ::fork();
    if (child == 0) {
      for (;;) ::pause();
    }
    return child;
  }, absent, unavailable);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  (void)host->remove_dir(dir + "/child");
  (void)host->remove_dir(dir);

  ASSERT_EQ(real_log.size(), fake_log.size());
  for (std::size_t i = 0; i < real_log.size(); ++i) EXPECT_EQ(fake_log[i], real_log[i]) << "step " << i;
}

}  // namespace
}  // namespace capsule::sandbox

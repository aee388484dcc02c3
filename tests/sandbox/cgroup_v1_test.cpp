// cgroup v1 back end on this host's real hierarchies (skipped where memory and pids are not v1 mounts), and
// the mountinfo parsing that finds separate and co-mounted hierarchies.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "sandbox/cgroup.h"
#include "sandbox/cgroup_fs.h"
#include "sandbox/error.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using namespace std::chrono_literals;
using capsule::testing::kMiB;
const std::vector<std::string> kHierarchies{"memory", "pids", "cpu", "cpuacct", "freezer"};

using capsule::testing::slurp;

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// A forked child that waits until the parent has put it into the cgroup, then runs body and exits with its value.
struct Child {
  pid_t pid = -1;
  int go_fd = -1;

  void go() {
    const char byte = 1;
    ASSERT_EQ(::write(go_fd, &byte, 1), 1);
    ::close(go_fd);
  }
  int wait() const {
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    return status;
  }
};

template <class Body>
Child fork_child(Body body) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[1]);
    char byte;
    if (::read(fds[0], &byte, 1) != 1) ::_exit(100);
    ::_exit(body());
  }
  ::close(fds[0]);
  return {pid, fds[1]};
}

// Touches bytes of fresh anonymous memory so it is really charged.
int touch_memory(std::uint64_t bytes) {
  void* area = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) return 2;
  std::memset(area, 0x5a, bytes);
  return 0;
}

class CgroupV1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    mounts_ = parse_v1_mounts(slurp(kMountInfoPath), "/sys/fs/cgroup");
    for (const std::string& controller : kHierarchies)
      if (!mounts_.count(controller)) GTEST_SKIP() << "no cgroup v1 " << controller << " hierarchy on this host";
    config_.parent = "capsule-test-" + std::to_string(::getpid());
    manager_ = make_cgroup_v1(config_);
    // Orphaned grandchildren are re-parented to this process, so the tests can reap them and see their signal.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  }

  void TearDown() override {
    manager_.reset();
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    std::vector<std::string> hierarchies = kHierarchies;
    hierarchies.push_back("cpuset");  // boxes get a directory there too when it is mounted
    for (const std::string& controller : hierarchies) {
      if (!mounts_.count(controller)) continue;
      const std::string parent = mounts_[controller] + "/" + config_.parent;
      ::rmdir(parent.c_str());
      EXPECT_FALSE(exists(parent)) << parent << " left behind";
    }
  }

  std::string dir(const std::string& controller, const std::string& name) {
    return mounts_[controller] + "/" + config_.parent + "/" + name;
  }
  std::string file(const std::string& controller, const std::string& name, const std::string& file_name) {
    return dir(controller, name) + "/" + file_name;
  }

  std::map<std::string, std::string> mounts_;
  CgroupConfig config_;
  std::unique_ptr<CgroupManager> manager_;
};

TEST_F(CgroupV1Test, CreateWritesLimitsToEveryHierarchy) {
  auto group = manager_->create("run", {32 * kMiB, 50, 0.5});
  EXPECT_EQ(manager_->version(), 1);
  for (const std::string& controller : kHierarchies) EXPECT_TRUE(exists(dir(controller, "run"))) << controller;
  EXPECT_EQ(slurp(file("memory", "run", "memory.limit_in_bytes")), "33554432\n");
  if (exists(file("memory", "run", "memory.memsw.limit_in_bytes"))) {
    EXPECT_EQ(slurp(file("memory", "run", "memory.memsw.limit_in_bytes")), "33554432\n");
  }
  EXPECT_EQ(slurp(file("pids", "run", "pids.max")), "50\n");
  EXPECT_EQ(slurp(file("cpu", "run", "cpu.cfs_period_us")), "100000\n");
  EXPECT_EQ(slurp(file("cpu", "run", "cpu.cfs_quota_us")), "50000\n");
  EXPECT_EQ(manager_->list(), std::vector<std::string>{"run"});
}

// The parent weighs as many host processes as it is given (1024 shares each), within the kernel's range;
// without a weight it keeps the kernel's 1024.
TEST_F(CgroupV1Test, TheParentGetsCpuSharesInProportionToItsWeight) {
  const std::string shares = mounts_["cpu"] + "/" + config_.parent + "/cpu.shares";
  manager_->create("run", {})->remove();
  EXPECT_EQ(slurp(shares), "1024\n");
  for (const auto& [weight, expected] : {std::pair{6u, "6144\n"}, std::pair{300u, "262144\n"}}) {
    manager_->remove_parent();
    config_.parent_cpu_weight = weight;
    manager_ = make_cgroup_v1(config_);
    auto group = manager_->create("run", {});
    EXPECT_EQ(slurp(shares), expected) << weight;
    EXPECT_EQ(slurp(file("cpu", "run", "cpu.shares")), "1024\n") << "boxes share the parent's weight equally";
    group->remove();
  }
}

TEST_F(CgroupV1Test, TheBoxJoinsCpusetWithItsParentsCpusButItsExecLeavesDoNot) {
  if (!mounts_.count("cpuset")) GTEST_SKIP() << "no cpuset hierarchy on this host";
  auto group = manager_->create("run", {});
  const std::string cpus = slurp(mounts_["cpuset"] + "/cpuset.cpus");
  EXPECT_EQ(slurp(file("cpuset", "run", "cpuset.cpus")), cpus);
  auto leaf = group->create_child("exec-1");
  EXPECT_TRUE(exists(dir("memory", "run/exec-1")));
  EXPECT_FALSE(exists(dir("cpuset", "run/exec-1")));
  group->remove();
  EXPECT_FALSE(exists(dir("cpuset", "run")));
}

TEST_F(CgroupV1Test, LimitTheKernelRefusesLeavesNothing) {
  for (const CgroupLimits& limits : {CgroupLimits{0, 5'000'000, 0}, CgroupLimits{0, 0, 0.001}}) {
    try {
      manager_->create("run", limits);
      ADD_FAILURE() << "create accepted a limit the kernel refuses";
    } catch (const SandboxError& error) {
      EXPECT_EQ(error.cause().errno_value, EINVAL) << error.what();
      EXPECT_EQ(error.cause().path.rfind(mounts_[limits.pids ? "pids" : "cpu"], 0), 0u) << error.what();
    }
    for (const std::string& controller : kHierarchies) EXPECT_FALSE(exists(dir(controller, "run"))) << controller;
  }
}

TEST_F(CgroupV1Test, AddProcessJoinsEveryHierarchy) {
  auto group = manager_->create("run", {});
  Child child = fork_child([] {
    for (;;) ::pause();
    return 0;
  });
  group->add_process(child.pid);
  EXPECT_EQ(group->processes(), std::vector<pid_t>{child.pid});
  const std::string membership = slurp("/proc/" + std::to_string(child.pid) + "/cgroup");
  for (const std::string& controller : kHierarchies)
    EXPECT_NE(membership.find(controller + ":/" + config_.parent + "/run\n"), std::string::npos) << membership;
  group->kill_all();
  const int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ::close(child.go_fd);
}

TEST_F(CgroupV1Test, KillAllReachesADoubleForkedSetsidGrandchild) {
  auto group = manager_->create("run", {});
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  Child child = fork_child([&] {
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::setsid();
      for (;;) ::pause();
    }
    return ::write(report[1], &grandchild, sizeof grandchild) == sizeof grandchild ? 0 : 1;
  });
  ::close(report[1]);
  group->add_process(child.pid);
  child.go();
  EXPECT_EQ(child.wait(), 0);
  pid_t grandchild = -1;
  ASSERT_EQ(::read(report[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ::close(report[0]);
  EXPECT_EQ(group->processes(), std::vector<pid_t>{grandchild});

  group->kill_all();
  EXPECT_TRUE(group->processes().empty());
  EXPECT_EQ(slurp(file("freezer", "run", "freezer.state")), "THAWED\n");
  int status = 0;
  ASSERT_EQ(::waitpid(grandchild, &status, 0), grandchild);  // ours: this process is a subreaper
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_F(CgroupV1Test, SignalAllReachesEveryMember) {
  auto group = manager_->create("run", {});
  Child first = fork_child([] { return 0; });
  Child second = fork_child([] { return 0; });
  group->add_process(first.pid);
  group->add_process(second.pid);
  group->signal_all(SIGTERM);  // both still wait on their pipe
  for (const Child& child : {first, second}) {
    const int status = child.wait();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    ::close(child.go_fd);
  }
}

TEST_F(CgroupV1Test, UsageReportsCpuTime) {
  auto group = manager_->create("run", {});
  Child child = fork_child([] {
    const std::clock_t start = std::clock();
    volatile std::uint64_t sink = 0;
    while (std::clock() - start < CLOCKS_PER_SEC * 3 / 10)  // clock() is a system call: spin in between
      for (int i = 0; i < 1 << 20; ++i) sink = sink + 1;
    return 0;
  });
  group->add_process(child.pid);
  child.go();
  EXPECT_EQ(child.wait(), 0);
  const CgroupUsage usage = group->usage();
  EXPECT_GE(usage.cpu_user_ns + usage.cpu_sys_ns, 250'000'000u);
  EXPECT_GE(usage.cpu_user_ns, 150'000'000u);
  EXPECT_EQ(usage.oom_kills, 0u);
}

TEST_F(CgroupV1Test, UsageReportsPeakMemory) {
  auto group = manager_->create("run", {});
  Child child = fork_child([] { return touch_memory(64 * kMiB); });
  group->add_process(child.pid);
  child.go();
  EXPECT_EQ(child.wait(), 0);
  EXPECT_GE(group->usage().peak_memory_bytes, 64 * kMiB);
}

TEST_F(CgroupV1Test, MemoryLimitOomKills) {
  auto group = manager_->create("run", {32 * kMiB, 0, 0});
  Child child = fork_child([] { return touch_memory(200 * kMiB); });
  group->add_process(child.pid);
  child.go();
  const int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  const CgroupUsage usage = group->usage();
  EXPECT_GE(usage.oom_kills, 1u);
  EXPECT_LE(usage.peak_memory_bytes, 32 * kMiB);
}

TEST_F(CgroupV1Test, PidsLimitMakesForkFail) {
  auto group = manager_->create("run", {0, 4, 0});
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  Child child = fork_child([&] {
    int forked = 0, error = 0;
    for (; forked < 10; ++forked) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        for (;;) ::pause();
      }
      if (pid < 0) {
        error = errno;
        break;
      }
    }
    const int result[2] = {forked, error};
    if (::write(report[1], result, sizeof result) != sizeof result) return 1;
    for (;;) ::pause();
  });
  ::close(report[1]);
  group->add_process(child.pid);
  child.go();
  int result[2] = {-1, -1};
  ASSERT_EQ(::read(report[0], result, sizeof result), static_cast<ssize_t>(sizeof result));
  ::close(report[0]);
  EXPECT_EQ(result[0], 3);  // the child itself is the 4th
  EXPECT_EQ(result[1], EAGAIN);
  EXPECT_EQ(group->processes().size(), 4u);
  group->kill_all();
  const int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST_F(CgroupV1Test, RemoveKillsAndLeavesNoDirectories) {
  auto group = manager_->create("run", {16 * kMiB, 10, 1});
  Child child = fork_child([] { return 0; });
  group->add_process(child.pid);
  group->remove();
  for (const std::string& controller : kHierarchies) EXPECT_FALSE(exists(dir(controller, "run"))) << controller;
  const int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ::close(child.go_fd);
  EXPECT_NO_THROW(group->remove());
  EXPECT_TRUE(manager_->list().empty());
}

TEST_F(CgroupV1Test, RemoveParentOnlyWhenEmpty) {
  auto group = manager_->create("run", {16 * kMiB, 10, 0});
  manager_->remove_parent();  // still holds a sandbox cgroup: rmdir fails with EBUSY, nothing changes
  for (const std::string& controller : kHierarchies) EXPECT_TRUE(exists(dir(controller, "run"))) << controller;
  group->remove();
  manager_->remove_parent();
  for (const std::string& controller : kHierarchies) {
    EXPECT_FALSE(exists(mounts_[controller] + "/" + config_.parent)) << controller;
  }
}

// The kernel refuses rmdir of a group with a child group (EBUSY), so removal cannot stop at the quick rmdirs:
// a leaf an exec left behind goes with its box.
TEST_F(CgroupV1Test, RemoveTakesAnExecLeafLeftBehind) {
  auto group = manager_->create("run", {16 * kMiB, 10, 0});
  auto leaf = group->create_child("exec-1");
  Child child = fork_child([] { return 0; });
  leaf->add_process(child.pid);
  group->remove();
  for (const std::string& controller : kHierarchies) {
    EXPECT_FALSE(exists(dir(controller, "run/exec-1"))) << controller;
    EXPECT_FALSE(exists(dir(controller, "run"))) << controller;
  }
  const int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ::close(child.go_fd);
  EXPECT_NO_THROW(leaf->remove());
}

// The parent is made once per manager, and again when it was removed in between (a clean shutdown's
// remove_parent, or an operator).
TEST_F(CgroupV1Test, CreateMakesTheParentAgainWhenItIsGone) {
  manager_->create("first", {0, 0, 0})->remove();
  manager_->remove_parent();
  ASSERT_FALSE(exists(mounts_["memory"] + "/" + config_.parent));
  auto again = manager_->create("second", {16 * kMiB, 10, 0});
  for (const std::string& controller : kHierarchies) EXPECT_TRUE(exists(dir(controller, "second"))) << controller;
  EXPECT_EQ(slurp(file("memory", "second", "memory.limit_in_bytes")), std::to_string(16 * kMiB) + "\n");
  again->remove();
}

TEST_F(CgroupV1Test, ListAndOpenFindALeftover) {
  // What a crashed daemon leaves: the directories and a live process in them.
  Child child = fork_child([] { return 0; });
  for (const std::string& controller : kHierarchies) {
    ::mkdir((mounts_[controller] + "/" + config_.parent).c_str(), 0755);
    ASSERT_TRUE(::mkdir(dir(controller, "old").c_str(), 0755) == 0 || errno == EEXIST);
    std::ofstream(file(controller, "old", "cgroup.procs")) << child.pid;
  }
  auto restarted = make_cgroup_v1(config_);
  EXPECT_EQ(restarted->list(), std::vector<std::string>{"old"});
  auto old = restarted->open("old");
  EXPECT_EQ(old->processes(), std::vector<pid_t>{child.pid});
  old->remove();
  const int status = child.wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ::close(child.go_fd);
  for (const std::string& controller : kHierarchies) EXPECT_FALSE(exists(dir(controller, "old"))) << controller;
  try {
    restarted->open("old");
    ADD_FAILURE() << "opened a removed group";
  } catch (const SandboxError& error) {
    EXPECT_EQ(error.cause().errno_value, ENOENT);
  }
}

TEST_F(CgroupV1Test, DetectFindsVersion1OnThisHost) {
  if (exists("/sys/fs/cgroup/cgroup.controllers")) GTEST_SKIP() << "unified hierarchy at the root";
  EXPECT_EQ(detect_cgroups(CgroupConfig{})->version(), 1);
}

TEST(CgroupV1Mounts, FindsSeparateAndCoMountedHierarchiesUnderTheRoot) {
  const std::string mountinfo =
      "30 22 0:27 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755\n"
      "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
      "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "35 30 0:32 / /sys/fs/cgroup/pids\\040x rw,relatime shared:3 master:1 - cgroup cgroup rw,pids\n"
      "36 30 0:33 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n"
      "37 30 0:34 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
      "38 30 0:35 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
      "39 22 0:31 / /elsewhere/memory rw - cgroup cgroup rw,memory\n"
      "40 22 0:36 / /sys/fs/cgroupx/blkio rw - cgroup cgroup rw,blkio\n";
  const auto mounts = parse_v1_mounts(mountinfo, "/sys/fs/cgroup/");
  EXPECT_EQ(mounts.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(mounts.at("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(mounts.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(mounts.at("pids"), "/sys/fs/cgroup/pids x");
  EXPECT_EQ(mounts.at("freezer"), "/sys/fs/cgroup/freezer");
  EXPECT_FALSE(mounts.count("name=systemd") || mounts.count("systemd") || mounts.count("rw"));
  EXPECT_FALSE(mounts.count("blkio"));  // outside the root
  EXPECT_FALSE(mounts.count("nsdelegate"));
  EXPECT_TRUE(parse_v1_mounts(mountinfo, "/elsewhere").count("memory"));
}

}  // namespace
}  // namespace capsule::sandbox

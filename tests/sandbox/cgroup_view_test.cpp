// The cgroup view inside a box (sandbox/cgroup_view.h) and its CPU affinity (sandbox/cpu_affinity.h): a real
// box shows its own limits read-only at /sys/fs/cgroup, nproc and the JVM agree with its cpu and memory limits.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "sandbox/cgroup.h"
#include "sandbox/cgroup_fs.h"
#include "sandbox/launcher.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using capsule::testing::host_spec;
using capsule::testing::shared_launcher;

using capsule::testing::kMiB;

Result run_sh_limited(const std::string& script, std::uint64_t memory_bytes, double cpus) {
  SandboxSpec spec = host_spec({"/bin/sh", "-c", script});
  spec.limits.memory_bytes = memory_bytes;
  spec.limits.cpus = cpus;
  return shared_launcher().run(spec);
}

using capsule::testing::describe;

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

bool has_java() { return ::access("/usr/bin/java", X_OK) == 0; }

TEST(CgroupView, TheBoxSeesItsOwnMemoryLimitAtTheRootOfItsView) {
  const std::string file = shared_launcher().cgroup_version() == 1 ? "/sys/fs/cgroup/memory/memory.limit_in_bytes"
                                                                   : "/sys/fs/cgroup/memory.max";
  Result r = run_sh_limited("cat " + file, 256 * kMiB, 0);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_EQ(r.stdout_capture.head, std::to_string(256 * kMiB) + "\n");
}

TEST(CgroupView, ItShowsNoHostPathAndIsReadOnly) {
  const std::string limit = shared_launcher().cgroup_version() == 1 ? "/sys/fs/cgroup/memory/memory.limit_in_bytes"
                                                                    : "/sys/fs/cgroup/memory.max";
  // /proc/self/cgroup is relative to the box: the exec's own leaf, never the daemon's "capsule/<id>" path.
  Result r = run_sh_limited("grep -c capsule /proc/self/cgroup; echo 1 > " + limit + " 2>&1 && echo wrote;"
                    " mkdir /sys/fs/cgroup/x 2>&1 && echo made; true",
                    128 * kMiB, 0);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_EQ(r.stdout_capture.head.substr(0, 2), "0\n") << describe(r);
  EXPECT_EQ(r.stdout_capture.head.find("wrote"), std::string::npos) << describe(r);
  EXPECT_EQ(r.stdout_capture.head.find("made"), std::string::npos) << describe(r);
  EXPECT_NE(r.stdout_capture.head.find("Read-only file system"), std::string::npos) << describe(r);
}

// On v1 an exec's leaf is in the memory, cpuacct and freezer hierarchies only: in its own pids and cpu cgroups
// (those /proc/self/cgroup names) it finds the box's pids.max and CFS quota, where runtimes read them.
TEST(CgroupView, AnExecFindsTheBoxsPidsAndCpuLimitsInItsOwnCgroup) {
  if (shared_launcher().cgroup_version() != 1) GTEST_SKIP() << "v1 layout (v2 hands limits to its leaves)";
  // own NAME: this process's cgroup path in the hierarchy of controller NAME.
  const std::string own = "own() { sed -n \"s/^[0-9]*:\\(.*,\\)*$1\\(,.*\\)*:\\(.*\\)$/\\3/p\" /proc/self/cgroup; };";
  SandboxSpec spec = host_spec({"/bin/sh", "-c",
                                own + " cat /sys/fs/cgroup/pids$(own pids)/pids.max"
                                      " /sys/fs/cgroup/cpu$(own cpu)/cpu.cfs_quota_us; own memory"});
  spec.limits.pids = 77;
  spec.limits.cpus = 0.5;
  const Result r = shared_launcher().run(spec);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  // Co-mounted with cpuacct (cpu,cpuacct), cpu has the exec's leaf, and its quota is the leaf's own.
  const bool cpu_comounted = std::filesystem::equivalent("/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct");
  const std::string quota = cpu_comounted ? "-1" : "50000";
  EXPECT_EQ(r.stdout_capture.head, "77\n" + quota + "\n/exec-1\n")
      << "pids.max, the CFS quota, then the memory cgroup (the exec's own leaf): " << describe(r);
}

TEST(CgroupView, NprocAndPythonAgreeWithTheCpuLimit) {
  if (usable_cpus() < 2) GTEST_SKIP() << "needs at least two CPUs to tell a one-CPU box apart";
  Result one = run_sh_limited("nproc; python3 -c 'import os; print(len(os.sched_getaffinity(0)))'", 0, 1);
  ASSERT_EQ(one.status, Status::kSucceeded) << describe(one);
  EXPECT_EQ(one.stdout_capture.head, "1\n1\n");
  // A fraction rounds up; no limit leaves every CPU the launcher has.
  Result half = run_sh_limited("nproc", 0, 0.5);
  EXPECT_EQ(half.stdout_capture.head, "1\n") << describe(half);
  Result all = run_sh_limited("nproc", 0, 0);
  EXPECT_EQ(all.stdout_capture.head, std::to_string(usable_cpus()) + "\n") << describe(all);
}

TEST(CgroupView, TheJvmReportsTheBoxsMemoryLimitAndCpuCount) {
  if (!has_java()) GTEST_SKIP() << "no java on this host";
  if (usable_cpus() < 2) GTEST_SKIP() << "needs at least two CPUs";
  Result r = run_sh_limited("java -XshowSettings:system -version 2>&1", 256 * kMiB, 1);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  const std::string& text = r.stdout_capture.head;
  EXPECT_NE(text.find("Memory Limit: 256.00M"), std::string::npos) << text;
  EXPECT_NE(text.find("Effective CPU Count: 1\n"), std::string::npos) << text;
}

TEST(CgroupView, TheJvmSizesItsDefaultHeapFromTheBoxsMemoryLimit) {
  if (!has_java()) GTEST_SKIP() << "no java on this host";
  // The default MaxHeapSize is a quarter of the memory the JVM sees: 128 MiB in a 512 MiB box, not a quarter
  // of the host's RAM (which gets a growing build OOM-killed).
  Result r = run_sh_limited("java -XX:+PrintFlagsFinal -version 2>/dev/null | awk '$2 == \"MaxHeapSize\" {print $4}'",
                    512 * kMiB, 0);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_EQ(r.stdout_capture.head, std::to_string(128 * kMiB) + "\n") << describe(r);
}

// A minimal CgroupFs that only answers /proc/self/mountinfo: enough to build a v1 manager's view.
class MountinfoOnly final : public CgroupFs {
 public:
  explicit MountinfoOnly(std::string text) : text_(std::move(text)) {}
  std::string read(const std::string&) const override { return text_; }
  void write(const std::string&, const std::string&) override {}
  bool exists(const std::string&) const override { return true; }
  int make_dir(const std::string&) override { return 0; }
  int remove_dir(const std::string&) override { return 0; }
  std::vector<std::string> list_dirs(const std::string&) const override { return {}; }
  void signal(pid_t, int) override {}

 private:
  std::string text_;
};

TEST(CgroupView, VersionOneMountsEachHierarchyOnceWithItsCoMountedControllersAsLinks) {
  auto fs = std::make_shared<MountinfoOnly>(
      "31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "32 30 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
      "33 30 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
      "34 30 0:31 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n"
      "35 30 0:32 / /sys/fs/cgroup/net_cls,net_prio rw - cgroup cgroup rw,net_cls,net_prio\n");
  const auto views = make_cgroup_v1(CgroupConfig{}, fs)->view_mounts();
  // No cpuset on this host: the view has what there is; freezer and net_cls are not the box's limits.
  const std::vector<CgroupViewMount> expected{{"cgroup", "memory", "memory", {}},
                                              {"cgroup", "pids", "pids", {}},
                                              {"cgroup", "cpu,cpuacct", "cpu,cpuacct", {"cpu", "cpuacct"}}};
  EXPECT_EQ(views, expected);
}

}  // namespace
}  // namespace capsule::sandbox

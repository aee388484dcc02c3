// Behaviour of real sandboxes launched through the library: exit codes, env, stdin, output caps,
// time/CPU/memory/pids/tmpfs limits, ownership, read-only rootfs, workspace, toolchains, setup errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sandbox/launcher.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using capsule::testing::host_spec;
using capsule::testing::shared_launcher;
using capsule::testing::testcase;
using namespace std::chrono_literals;

Result run_sh(const std::string& script, const std::function<void(SandboxSpec&)>& adjust = {}) {
  SandboxSpec spec = host_spec({"/bin/sh", "-c", script});
  if (adjust) adjust(spec);
  return shared_launcher().run(spec);
}

std::string out(const Result& r) { return r.stdout_capture.head; }

using capsule::testing::describe;

TEST(Launcher, ExitCodesAreReported) {
  Result ok = run_sh("exit 0");
  EXPECT_EQ(ok.status, Status::kSucceeded) << describe(ok);
  EXPECT_EQ(ok.exit_code, 0);
  Result failed = run_sh("exit 3");
  EXPECT_EQ(failed.status, Status::kFailed) << describe(failed);
  EXPECT_EQ(failed.exit_code, 3);
}

TEST(Launcher, SignalDeathIsReported) {
  Result r = run_sh("kill -SEGV $$");
  EXPECT_EQ(r.status, Status::kSignaled) << describe(r);
  EXPECT_EQ(r.signal, SIGSEGV);
}

TEST(Launcher, EnvironmentAndCwdAreExactlyTheSpecs) {
  Result r = run_sh("echo \"$CAPSULE_X|$PIP_FIND_LINKS|$(pwd)\"", [](SandboxSpec& s) {
    s.env.push_back("CAPSULE_X=42");
    s.cwd = "/tmp";
  });
  EXPECT_EQ(out(r), "42||/tmp\n") << describe(r);
}

TEST(Launcher, HostToolConfigurationDoesNotLeakIn) {
  Result r = run_sh("test ! -e /etc/pip.conf && test ! -e /root/.m2 && test ! -e /etc/environment && echo clean");
  EXPECT_EQ(out(r), "clean\n") << describe(r);
}

TEST(Launcher, StdinBytesAreDelivered) {
  Result r = run_sh("cat; echo", [](SandboxSpec& s) { s.stdin_data = "hello from stdin"; });
  EXPECT_EQ(out(r), "hello from stdin\n") << describe(r);
}

TEST(Launcher, StdinIsClosedWithoutData) {
  Result r = run_sh("cat; echo done");
  EXPECT_EQ(out(r), "done\n") << describe(r);
}

TEST(Launcher, OutputBeyondTheCapKeepsHeadAndTail) {
  Result r = run_sh("echo START; head -c 300000 /dev/zero | tr '\\0' x; echo; echo END; echo err >&2",
                    [](SandboxSpec& s) { s.limits.output_cap_bytes = 1000; });
  EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_TRUE(r.stdout_capture.truncated);
  EXPECT_EQ(r.stdout_capture.total_bytes, 6u + 300000u + 1u + 4u);
  EXPECT_EQ(r.stdout_capture.head.substr(0, 6), "START\n");
  EXPECT_EQ(r.stdout_capture.head.size(), 500u);
  EXPECT_EQ(r.stdout_capture.tail.size(), 500u);
  EXPECT_EQ(r.stdout_capture.tail.substr(496), "END\n");
  EXPECT_EQ(r.stderr_capture.head, "err\n");
}

TEST(Launcher, WallTimeoutKillsADoubleForkedSleeper) {
  // A duration unique to this test process marks the sleepers, so parallel tests cannot be confused with them.
  const std::string marker = "1000." + std::to_string(getpid());
  auto start = std::chrono::steady_clock::now();
  Result r = run_sh("(setsid sleep " + marker + " &); trap '' TERM; sleep " + marker, [](SandboxSpec& s) {
    s.limits.wall_time = 500ms;
    s.limits.kill_grace = 200ms;
  });
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.status, Status::kTimedOut) << describe(r);
  EXPECT_NE(r.reason.find("wall time"), std::string::npos);
  EXPECT_LT(elapsed, 10s);
  for (const pid_t leftover : testing::processes_running({"sleep", marker})) ADD_FAILURE() << "leftover sleeper " << leftover;
}

TEST(Launcher, ACommandEndedByTermRecordsSignal15AndWhy) {
  SandboxSpec spec = host_spec({"sleep", "60"});
  spec.limits.wall_time = 300ms;
  spec.limits.kill_grace = 30s;
  Result r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kTimedOut) << describe(r);
  EXPECT_EQ(r.signal, SIGTERM);
  EXPECT_EQ(r.termination.reason, "wall_time");
  EXPECT_FALSE(r.termination.kill_sent);
}

TEST(Launcher, ACommandIgnoringTermRecordsSignal9AfterTheGrace) {
  Result r = run_sh("trap '' TERM; while :; do sleep 1; done", [](SandboxSpec& s) {
    s.limits.wall_time = 300ms;
    s.limits.kill_grace = 300ms;
  });
  EXPECT_EQ(r.status, Status::kTimedOut) << describe(r);
  EXPECT_EQ(r.signal, SIGKILL);
  EXPECT_EQ(r.termination.reason, "wall_time");
  EXPECT_TRUE(r.termination.kill_sent);
  EXPECT_GE(r.termination.kill_after_ms, 300);
}

TEST(Launcher, CpuTimeLimitStopsABusyLoop) {
  Result r = run_sh("while :; do :; done", [](SandboxSpec& s) {
    s.limits.cpu_time = 500ms;
    s.limits.wall_time = 30s;
  });
  EXPECT_EQ(r.status, Status::kTimedOut) << describe(r);
  EXPECT_NE(r.reason.find("cpu time"), std::string::npos);
  EXPECT_EQ(r.termination.reason, "cpu_time");
  EXPECT_GE(r.cpu_user_ms + r.cpu_sys_ms, 400);
}

TEST(Launcher, CpuBandwidthLimitThrottles) {
  // Two busy loops for one second of wall time under a 0.25-core quota get far less than two cores.
  Result r = run_sh("(while :; do :; done) & a=$!; (while :; do :; done) & b=$!; sleep 1; kill $a $b",
                    [](SandboxSpec& s) { s.limits.cpus = 0.25; });
  EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_LT(r.cpu_user_ms + r.cpu_sys_ms, 0.6 * r.wall_ms) << describe(r);
}

TEST(Launcher, MemoryLimitEndsInOomKilled) {
  SandboxSpec spec = host_spec({"python3", "-c", "a = b'x' * (512 << 20)"});
  spec.limits.memory_bytes = 64ull << 20;
  Result r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kOomKilled) << describe(r);
  EXPECT_GE(r.oom_kills, 1u);
  EXPECT_LE(r.peak_memory_bytes, 64ull << 20);
}

// tmpfs pages count against the memory limit but belong to no process; fill_tmp, holding less than init, must
// still be the OOM killer's choice (a command's score is the maximum, init's is not), or the box dies with it and
// the run is capsule's internal_error.
TEST(Launcher, ATmpfsFilledPastTheMemoryLimitEndsOomKilled) {
  SandboxSpec spec = host_spec({testcase("fill_tmp")});
  spec.limits.memory_bytes = 64ull << 20;
  spec.limits.tmp_size_bytes = 1ull << 30;
  const Result r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kOomKilled) << describe(r);
  EXPECT_EQ(r.signal, SIGKILL) << describe(r);
  EXPECT_GE(r.oom_kills, 1u) << describe(r);
  const Result scores = run_sh("cat /proc/self/oom_score_adj /proc/1/oom_score_adj");
  EXPECT_EQ(scores.status, Status::kSucceeded) << describe(scores);
  EXPECT_TRUE(out(scores).starts_with("1000\n")) << out(scores);
  EXPECT_NE(out(scores).substr(out(scores).find('\n') + 1), "1000\n") << "init is not the preferred victim";
}

// A command may give its preference back (down to the score it inherited) and raise init's (raising needs no
// capability): the kernel then takes init. The box still ran out of its own memory: oom_killed, not capsule's
// internal_error that harnesses retry.
TEST(Launcher, ATmpfsFillThatTheKernelEndsByKillingInitIsOomKilled) {
  Result r = run_sh("echo 1000 > /proc/1/oom_score_adj && echo 0 > /proc/self/oom_score_adj && exec " +
                        testcase("fill_tmp"),
                    [](SandboxSpec& s) {
                      s.limits.memory_bytes = 64ull << 20;
                      s.limits.tmp_size_bytes = 1ull << 30;
                    });
  EXPECT_EQ(r.status, Status::kOomKilled) << describe(r);
  EXPECT_NE(r.reason.find("OOM kill of the sandbox's init"), std::string::npos) << describe(r);
  EXPECT_GE(r.oom_kills, 1u) << describe(r);
}

TEST(Launcher, PeakMemoryIsMeasured) {
  SandboxSpec spec = host_spec({"python3", "-c", "a = b'x' * (100 << 20)"});
  Result r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_GE(r.peak_memory_bytes, 100ull << 20);
}

TEST(Launcher, PidsLimitContainsAForkBomb) {
  const char* bomb =
      "import os, errno, time\n"
      "children = 0\n"
      "try:\n"
      "    while children < 500:\n"
      "        if os.fork() == 0:\n"
      "            time.sleep(30)\n"
      "            os._exit(0)\n"
      "        children += 1\n"
      "except OSError as e:\n"
      "    print(children, errno.errorcode[e.errno])\n";
  SandboxSpec spec = host_spec({"python3", "-c", bomb});
  spec.limits.pids = 16;
  Result r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
  ASSERT_NE(out(r).find(" EAGAIN"), std::string::npos) << describe(r);
  EXPECT_LT(std::stoi(out(r)), 16) << describe(r);
}

TEST(Launcher, TmpfsSizeIsEnforced) {
  Result r = run_sh("dd if=/dev/zero of=/tmp/big bs=1M count=32 2>&1", [](SandboxSpec& s) {
    s.limits.tmp_size_bytes = 8ull << 20;
  });
  EXPECT_EQ(r.status, Status::kFailed) << describe(r);
  EXPECT_NE(out(r).find("No space left on device"), std::string::npos) << describe(r);
}

TEST(Launcher, ImageFilesAreRootOwnedInside) {
  Result r = run_sh("stat -c '%u:%g %U' /usr/bin/env /etc/passwd /; id -u");
  EXPECT_EQ(out(r), "0:0 root\n0:0 root\n0:0 root\n0\n") << describe(r);
}

TEST(Launcher, RootfsIsCopyOnWriteAndCanBeReadOnly) {
  Result writable = run_sh("echo data > /etc/new-file && cat /etc/new-file");
  EXPECT_EQ(out(writable), "data\n") << describe(writable);
  EXPECT_FALSE(std::filesystem::exists("/tmp/capsule-test/images/host-root-v1/etc/new-file"));
  Result usr = run_sh("touch /usr/x 2>&1");
  EXPECT_NE(out(usr).find("Read-only file system"), std::string::npos) << describe(usr);
  Result read_only = run_sh("touch /etc/new-file 2>&1", [](SandboxSpec& s) { s.readonly_rootfs = true; });
  EXPECT_EQ(read_only.status, Status::kFailed);
  EXPECT_NE(out(read_only).find("Read-only file system"), std::string::npos) << describe(read_only);
}

TEST(Launcher, WritableWorkspaceMapsSandboxRootToItsOwner) {
  const std::string dir = "/tmp/capsule-test/workspace-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/input.txt") << "input";
  ASSERT_EQ(chown(dir.c_str(), 1000, 1000), 0);
  ASSERT_EQ(chown((dir + "/input.txt").c_str(), 1000, 1000), 0);
  Result r = run_sh("cat /workspace/input.txt; echo out > /workspace/output.txt; stat -c %u /workspace/input.txt",
                    [&](SandboxSpec& s) { s.mounts.push_back(BindMount{dir, "/workspace", false, true}); });
  EXPECT_EQ(out(r), "input0\n") << describe(r);  // the owner's files are sandbox root's inside
  struct stat st;
  ASSERT_EQ(stat((dir + "/output.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);  // and sandbox root's writes land as the owner on the host
  EXPECT_EQ(st.st_gid, 1000u);
  std::filesystem::remove_all(dir);
}

TEST(Launcher, WritableRootOwnedBindNeverWritesAsHostRoot) {
  const std::string dir = "/tmp/capsule-test/rootdir-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  std::ofstream(dir + "/root-file") << "x";
  Result r = run_sh("echo new > /w/created; echo more >> /w/root-file 2>/dev/null || echo denied",
                    [&](SandboxSpec& s) { s.mounts.push_back(BindMount{dir, "/w", false, true}); });
  EXPECT_EQ(out(r), "denied\n") << describe(r);
  struct stat st;
  ASSERT_EQ(stat((dir + "/created").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 100000u);  // the unprivileged sandbox root id, not host root
  std::filesystem::remove_all(dir);
}

TEST(Launcher, CopyOnWriteOverlayLeavesTheHostDirectoryUntouched) {
  const std::string base = "/tmp/capsule-test/cow-" + std::to_string(getpid());
  std::filesystem::create_directories(base + "/workspace/sub");
  std::ofstream(base + "/workspace/keep.txt") << "keep";
  std::ofstream(base + "/workspace/edit.txt") << "before";
  std::ofstream(base + "/workspace/sub/gone.txt") << "gone";
  Result r = run_sh("cd /workspace && echo after > edit.txt && rm sub/gone.txt && echo new > new.txt && "
                    "stat -c %u keep.txt && cat keep.txt edit.txt",
                    [&](SandboxSpec& s) {
                      s.overlays.push_back(OverlayMount{{base + "/workspace"}, base + "/upper", base + "/work",
                                                        "/workspace"});
                    });
  EXPECT_EQ(out(r), "0\nkeepafter\n") << describe(r);
  std::ifstream edit(base + "/workspace/edit.txt");
  std::string text((std::istreambuf_iterator<char>(edit)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "before");
  EXPECT_TRUE(std::filesystem::exists(base + "/workspace/sub/gone.txt"));
  EXPECT_FALSE(std::filesystem::exists(base + "/workspace/new.txt"));
  EXPECT_TRUE(std::filesystem::exists(base + "/upper/new.txt"));
  EXPECT_TRUE(std::filesystem::exists(base + "/upper/edit.txt"));
  struct stat st;
  ASSERT_EQ(lstat((base + "/upper/sub/gone.txt").c_str(), &st), 0);  // a whiteout records the deletion
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == 0) << std::oct << st.st_mode;
  std::filesystem::remove_all(base);
}

TEST(Launcher, HostnameAndPid1) {
  Result r = run_sh("hostname; cat /proc/1/comm; echo $$");
  EXPECT_EQ(out(r), "capsule\ncapsule-init\n2\n") << describe(r);
}

TEST(Launcher, Pid1ReapsOrphans) {
  Result r = run_sh("(sleep 0.1 &); sleep 0.6; cat /proc/[0-9]*/stat 2>/dev/null | awk '$3 == \"Z\"' | wc -l");
  EXPECT_EQ(out(r), "0\n") << describe(r);
}

TEST(Launcher, OnlyLoopbackNetwork) {
  Result r = run_sh("ls /sys/class/net");
  EXPECT_EQ(out(r), "lo\n") << describe(r);
}

TEST(Launcher, JavaRuns) {
  Result r = shared_launcher().run(host_spec({"java", "-version"}));
  EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_NE(r.stderr_capture.head.find("openjdk version \"17"), std::string::npos) << describe(r);
}

TEST(Launcher, PythonRuns) {
  Result r = shared_launcher().run(host_spec({"python3", "-c", "import sys, ssl, json; print(sys.version_info[0])"}));
  EXPECT_EQ(out(r), "3\n") << describe(r);
}

TEST(Launcher, MavenRuns) {
  Result r = shared_launcher().run(host_spec({"mvn", "-v"}));
  EXPECT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_NE(out(r).find("Apache Maven 3"), std::string::npos) << describe(r);
}

TEST(Launcher, MissingCommandIsASetupFailure) {
  Result r = shared_launcher().run(host_spec({"no-such-command"}));
  EXPECT_EQ(r.status, Status::kSetupFailed) << describe(r);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.reason.find("no-such-command"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("No such file or directory"), std::string::npos) << r.reason;
}

TEST(Launcher, InvalidSpecNamesTheField) {
  SandboxSpec spec = host_spec({"true"});
  spec.cwd = "relative/dir";
  Result r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kSetupFailed);
  EXPECT_NE(r.reason.find("cwd"), std::string::npos) << r.reason;
  spec = host_spec({"true"});
  spec.mounts.push_back(BindMount{"/does/not/exist", "/mnt/x", true, true});
  r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kSetupFailed);
  EXPECT_NE(r.reason.find("/does/not/exist"), std::string::npos) << r.reason;
  spec = host_spec({"true"});
  spec.rootfs_layers.resize(501, spec.rootfs_layers.front());
  r = shared_launcher().run(spec);
  EXPECT_EQ(r.status, Status::kSetupFailed);
  EXPECT_NE(r.reason.find("rootfs_layers: overlayfs stacks at most 500 layers"), std::string::npos) << r.reason;
}

TEST(Launcher, CancelStopsARun) {
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);
    cancel = true;
  });
  RunHooks hooks;
  hooks.cancel = &cancel;
  Result r = shared_launcher().run(host_spec({"sleep", "100"}), hooks);
  canceller.join();
  EXPECT_EQ(r.status, Status::kCancelled) << describe(r);
}

// A cancel that comes before the command has exec'd (its process not yet in its cgroup) must still reach it
// as TERM once it has, not wait out the grace for the KILL.
TEST(Launcher, CancelBeforeTheCommandExecsEndsItWithTermNotTheKill) {
  std::atomic<bool> cancel{true};
  RunHooks hooks;
  hooks.cancel = &cancel;
  SandboxSpec spec = host_spec({"sleep", "100"});
  spec.limits.kill_grace = std::chrono::seconds(30);
  Result r = shared_launcher().run(spec, hooks);
  EXPECT_EQ(r.status, Status::kCancelled) << describe(r);
  EXPECT_EQ(r.termination.reason, "cancelled");
  EXPECT_FALSE(r.termination.kill_sent) << "TERM was lost: the KILL came after the grace, " << r.wall_ms << " ms";
}

TEST(Launcher, SetupTimingsAreFilledIn) {
  Result r = shared_launcher().run(host_spec({"true"}));
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_GT(r.setup.clone_ms, 0);
  EXPECT_GT(r.setup.mounts_ms, 0);
  EXPECT_GT(r.setup.exec_ms, 0);
  EXPECT_GT(r.setup.total_ms, 0);
}

}  // namespace
}  // namespace capsule::sandbox

// The box lifecycle (sandbox/sandbox.h): one box, many execs; each exec's tree in its own cgroup, killed whole on a
// timeout; idle timeouts; freeze/thaw; protected paths; destroy leaves no process, cgroup or scratch entry.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sandbox/command.h"
#include "sandbox/launcher.h"
#include "sandbox/protect.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

using capsule::testing::host_spec;
using capsule::testing::shared_launcher;

using capsule::testing::describe;

// Drives a box and one exec until the exec finishes (what a daemon's poll loop does for many).
Result await(Sandbox& box, Exec& exec) {
  while (!exec.finished()) {
    std::vector<pollfd> wanted = box.interest();
    for (const pollfd& p : exec.interest()) wanted.push_back(p);
    const std::int64_t deadline = exec.next_deadline();
    const std::int64_t now = monotonic_ns();
    const int timeout = deadline == 0 ? 1000 : static_cast<int>(std::max<std::int64_t>(0, (deadline - now) / 1000000 + 1));
    poll(wanted.data(), wanted.size(), timeout);
    for (const pollfd& p : wanted) {
      box.handle(p.fd, p.revents);
      exec.handle(p.fd, p.revents);
    }
    exec.tick(monotonic_ns());
  }
  return exec.finish();
}

class SandboxLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SandboxSpec base = host_spec({"true"});
    environment_ = environment_of(base);
    environment_.session = true;
    process_ = process_of(base);
  }

  Result sh(Sandbox& box, const std::string& script, std::chrono::milliseconds wall = std::chrono::seconds(30),
            std::chrono::milliseconds idle = {}) {
    ProcessSpec process = process_;
    process.argv = {"/bin/sh", "-c", script};
    process.limits.wall_time = wall;
    process.limits.kill_grace = std::chrono::milliseconds(200);
    process.idle_timeout = idle;
    std::unique_ptr<Exec> exec = box.exec(process);
    return await(box, *exec);
  }

  EnvironmentSpec environment_;
  ProcessSpec process_;
};

TEST_F(SandboxLifecycleTest, FilesPersistAcrossExecsOfOneBox) {
  auto box = shared_launcher().create(environment_);
  Result first = sh(*box, "echo kept > /var/tmp/note && echo pid=$$");
  ASSERT_EQ(first.status, Status::kSucceeded) << describe(first);
  Result second = sh(*box, "cat /var/tmp/note");
  ASSERT_EQ(second.status, Status::kSucceeded) << describe(second);
  EXPECT_EQ(second.stdout_capture.head, "kept\n");
  Result failing = sh(*box, "exit 3");
  EXPECT_EQ(failing.status, Status::kFailed);
  EXPECT_EQ(failing.exit_code, 3);
  box->destroy();
}

TEST_F(SandboxLifecycleTest, ATimeoutKillsTheExecsWholeTreeAndKeepsItsOutput) {
  auto box = shared_launcher().create(environment_);
  // A double-forked grandchild (reparented to init) must die with the exec that started it.
  Result r = sh(*box, "echo started; (sleep 300 &); sleep 300", std::chrono::milliseconds(700));
  EXPECT_EQ(r.status, Status::kTimedOut) << describe(r);
  EXPECT_EQ(r.stdout_capture.head, "started\n");
  Result ps = sh(*box, "for p in /proc/[0-9]*; do cat $p/comm; done | grep -c sleep || true");
  ASSERT_EQ(ps.status, Status::kSucceeded) << describe(ps);
  EXPECT_EQ(ps.stdout_capture.head, "0\n") << "a process of the timed-out exec survived it";
  box->destroy();
}

TEST_F(SandboxLifecycleTest, AnExecThatStopsWritingEndsAsIdleTimedOut) {
  auto box = shared_launcher().create(environment_);
  Result r = sh(*box, "echo a; sleep 0.2; echo b; sleep 300", std::chrono::seconds(30), std::chrono::milliseconds(800));
  EXPECT_EQ(r.status, Status::kIdleTimedOut) << describe(r);
  EXPECT_EQ(r.stdout_capture.head, "a\nb\n");
  box->destroy();
}

TEST_F(SandboxLifecycleTest, ProcessesLeftByAnExecThatExitedAreKilled) {
  auto box = shared_launcher().create(environment_);
  Result r = sh(*box, "sleep 300 >/dev/null 2>&1 & echo bye");
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  Result ps = sh(*box, "for p in /proc/[0-9]*; do cat $p/comm; done | grep -c sleep || true");
  EXPECT_EQ(ps.stdout_capture.head, "0\n");
  box->destroy();
}

TEST_F(SandboxLifecycleTest, AFrozenBoxRefusesExecsUntilThawed) {
  auto box = shared_launcher().create(environment_);
  ASSERT_EQ(sh(*box, "true").status, Status::kSucceeded);
  box->freeze();
  EXPECT_THROW(box->exec(process_), SandboxError);
  box->thaw();
  EXPECT_EQ(sh(*box, "echo thawed").stdout_capture.head, "thawed\n");
  box->destroy();
}

TEST_F(SandboxLifecycleTest, DestroyLeavesNoProcessCgroupOrScratchDir) {
  auto box = shared_launcher().create(environment_);
  ASSERT_EQ(sh(*box, "true").status, Status::kSucceeded);
  ProcessSpec background = process_;
  background.argv = {"/bin/sh", "-c", "sleep 300"};
  std::unique_ptr<Exec> running = box->exec(background);
  const pid_t init = box->init_pid();
  const std::string scratch = shared_launcher().options().scratch_dir + "/" + box->id();
  ASSERT_EQ(kill(init, 0), 0);
  ASSERT_TRUE(std::filesystem::exists(scratch));
  box->destroy();
  EXPECT_NE(kill(init, 0), 0) << "init survived destroy";
  running.reset();
  EXPECT_FALSE(std::filesystem::exists(scratch)) << "its scratch dir is left";
  EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/memory/" + testing::shared_cgroup_parent() + "/" + box->id()));
}

// A cgroup made ahead by prepare_exec() is the next exec's and starts empty: that exec's usage is its own (not
// the previous exec's CPU), the exec's leaf goes with the Exec, and destroy removes a prepared leaf never used.
TEST_F(SandboxLifecycleTest, APreparedCgroupIsTheNextExecsAndCountsOnlyIt) {
  auto box = shared_launcher().create(environment_);
  const std::string dir = "/sys/fs/cgroup/cpuacct/" + testing::shared_cgroup_parent() + "/" + box->id();
  const Result busy = sh(*box, "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done");
  ASSERT_EQ(busy.status, Status::kSucceeded) << describe(busy);
  ASSERT_GT(busy.cpu_user_ms + busy.cpu_sys_ms, 20.0) << "the loop should take some CPU";
  box->prepare_exec();
  box->prepare_exec();  // idempotent: one leaf ahead
  std::vector<std::string> leaves;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_directory()) leaves.push_back(entry.path().filename());
  }
  ASSERT_EQ(leaves.size(), 1u) << "one prepared leaf, the finished exec's gone";
  const Result quick = sh(*box, "true");
  ASSERT_EQ(quick.status, Status::kSucceeded) << describe(quick);
  EXPECT_LT(quick.cpu_user_ms + quick.cpu_sys_ms, busy.cpu_user_ms + busy.cpu_sys_ms)
      << "the next exec's usage is its own";
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + leaves[0])) << "the prepared leaf was used and went with its exec";
  box->prepare_exec();
  box->destroy();
  EXPECT_FALSE(std::filesystem::exists(dir)) << "destroy removes a prepared leaf with the box";
}

// The next exec's child waits in the box (prepare_exec) and the box's processes can signal it. Signals sent
// before that exec was asked for never reach it: a stopped or signalled standby is dropped and the exec forks
// anew. Each case is one exec that signals every process of the box while the next one's child waits.
TEST_F(SandboxLifecycleTest, SignalsSentIntoTheBoxBetweenExecsNeverReachTheNextExec) {
  auto box = shared_launcher().create(environment_);
  for (const std::string signals : {"kill -STOP -1; kill -TERM -1", "kill -TERM -1", "kill -STOP -1", "kill -KILL -1"}) {
    ProcessSpec hostile = process_;
    hostile.argv = {"/bin/sh", "-c", "sleep 0.3; " + signals + "; echo sent"};
    hostile.limits.wall_time = std::chrono::seconds(30);
    std::unique_ptr<Exec> sender = box->exec(hostile);
    box->prepare_exec();  // the next exec's child, forked while the sender sleeps
    const Result sent = await(*box, *sender);
    sender.reset();
    ASSERT_EQ(sent.status, Status::kSucceeded) << signals << ": " << describe(sent);
    const Result next = sh(*box, "echo alive", std::chrono::seconds(10));
    EXPECT_EQ(next.status, Status::kSucceeded) << signals << ": " << describe(next);
    EXPECT_EQ(next.stdout_capture.head, "alive\n") << signals;
  }
}

TEST_F(SandboxLifecycleTest, ProtectedPathsResistWritesRenamesLinksAndChmod) {
  const std::string ws = "/tmp/capsule-test/protect-" + std::to_string(getpid());
  std::filesystem::create_directories(ws + "/tests/unit");
  std::filesystem::create_directories(ws + "/src");
  std::ofstream(ws + "/tests/unit/test_a.py") << "assert True\n";
  std::ofstream(ws + "/src/app.py") << "x = 1\n";
  EnvironmentSpec env = environment_;
  env.overlays.push_back(OverlayMount{{ws}, ws + "-upper", ws + "-work", "/workspace", std::nullopt});
  env.protect = {"tests/**"};
  env.protect_base = "/workspace";
  auto box = shared_launcher().create(env);
  const std::string script =
      "cd /workspace; "
      "echo x >> tests/unit/test_a.py 2>/dev/null || echo write-refused; "
      "rm tests/unit/test_a.py 2>/dev/null || echo unlink-refused; "
      "mv tests gone 2>/dev/null || echo rename-refused; "
      "mv tests/unit tests/u2 2>/dev/null || echo rename-inner-refused; "
      "ln tests/unit/test_a.py src/hard 2>/dev/null || echo link-refused; "
      "chmod 777 tests/unit/test_a.py 2>/dev/null || echo chmod-refused; "
      "touch tests/new 2>/dev/null || echo create-refused; "
      "echo y >> src/app.py && echo src-writable; cat tests/unit/test_a.py";
  Result r = sh(*box, script);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_EQ(r.stdout_capture.head,
            "write-refused\nunlink-refused\nrename-refused\nrename-inner-refused\nlink-refused\nchmod-refused\n"
            "create-refused\nsrc-writable\nassert True\n");
  box->destroy();
  EXPECT_FALSE(std::filesystem::exists(ws + "-upper/tests/unit/test_a.py"));
  std::filesystem::remove_all(ws);
  std::filesystem::remove_all(ws + "-upper");
  std::filesystem::remove_all(ws + "-work");
}

// A hostile exec stops every process it can signal, new execs' children included: init keeps serving (it never
// waits on a child), the stopped exec ends at its timeout, and once the hostile one is gone the box works again.
TEST_F(SandboxLifecycleTest, AnExecStoppingEveryProcessCannotStallInit) {
  auto box = shared_launcher().create(environment_);
  ProcessSpec hostile = process_;
  hostile.argv = {"/bin/sh", "-c", "while :; do kill -STOP -1 2>/dev/null; done"};
  std::unique_ptr<Exec> stopper = box->exec(hostile);
  // Each child may be stopped before or after it joins its cgroup, or escape the loop: every one ends either way.
  for (int i = 0; i < 10; ++i) {
    Result r = sh(*box, "echo ran", std::chrono::milliseconds(500));
    EXPECT_TRUE(r.status == Status::kSucceeded || r.status == Status::kTimedOut) << describe(r);
  }
  stopper->cancel();
  await(*box, *stopper);
  stopper.reset();
  Result after = sh(*box, "echo works");
  EXPECT_EQ(after.status, Status::kSucceeded) << describe(after);
  EXPECT_EQ(after.stdout_capture.head, "works\n");
  box->destroy();
}

TEST_F(SandboxLifecycleTest, StdinCanStayOpenForLaterWrites) {
  auto box = shared_launcher().create(environment_);
  ProcessSpec process = process_;
  process.argv = {"cat"};
  process.keep_stdin_open = true;
  std::unique_ptr<Exec> exec = box->exec(process);
  exec->write_stdin("first\n");
  exec->write_stdin("second\n");
  exec->close_stdin();
  EXPECT_THROW(exec->write_stdin("late"), SandboxError);
  Result r = await(*box, *exec);
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_EQ(r.stdout_capture.head, "first\nsecond\n");
  exec.reset();
  box->destroy();
}

TEST_F(SandboxLifecycleTest, APtyIsTheControllingTerminalAndCtrlCReachesTheCommand) {
  auto box = shared_launcher().create(environment_);
  ProcessSpec process = process_;
  process.argv = {"/bin/sh", "-c", "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-terminals; stty size"};
  process.pty = true;
  process.rows = 40;
  process.cols = 100;
  std::unique_ptr<Exec> exec = box->exec(process);
  Result r = await(*box, *exec);
  exec.reset();
  ASSERT_EQ(r.status, Status::kSucceeded) << describe(r);
  EXPECT_NE(r.stdout_capture.head.find("all-terminals"), std::string::npos) << describe(r);
  EXPECT_NE(r.stdout_capture.head.find("40 100"), std::string::npos) << r.stdout_capture.head;

  // Ctrl-C typed into the terminal: the line discipline sends SIGINT to the foreground process group.
  process.argv = {"/bin/sh", "-c", "echo ready; exec cat"};
  Exec* running = nullptr;
  bool typed = false;
  RunHooks hooks;
  hooks.on_output = [&](OutputStream, std::string_view chunk) {
    if (!typed && chunk.find("ready") != std::string_view::npos) {
      typed = true;
      running->write_stdin("\x03");
    }
  };
  exec = box->exec(process, hooks);
  running = exec.get();
  Result interrupted = await(*box, *exec);
  EXPECT_TRUE(typed);
  EXPECT_EQ(interrupted.status, Status::kSignaled) << describe(interrupted);
  EXPECT_EQ(interrupted.signal, SIGINT);
  exec.reset();
  box->destroy();
}

TEST(ProtectGlob, MatchesNamesAndDirectoriesAcrossLevels) {
  EXPECT_TRUE(protect_glob_matches("tests/**", "tests"));
  EXPECT_TRUE(protect_glob_matches("tests/**", "tests/a/b.py"));
  EXPECT_TRUE(protect_glob_matches("**/test_*.py", "a/b/test_x.py"));
  EXPECT_TRUE(protect_glob_matches("**/test_*.py", "test_x.py"));
  EXPECT_FALSE(protect_glob_matches("**/test_*.py", "a/xtest_x.py"));
  EXPECT_TRUE(protect_glob_matches("src/test/**", "src/test"));
  EXPECT_FALSE(protect_glob_matches("src/test/**", "src/tests"));
  EXPECT_TRUE(protect_glob_matches("*.lock", ".hidden.lock"));
}

}  // namespace
}  // namespace capsule::sandbox

// `capsule session ...` against a real capsuled: create, exec (output, exit codes, timeouts, stdin, scripts,
// protected paths, -it on a terminal), background execs (attach, execs, kill, Ctrl-C detaching), cp both ways
// (a file, a tree), diff (and its --exclude/--include), checkpoint and reset, ls, show, rm, and an exec collecting
// real pytest's JUnit report.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledSessionCli : public Capsuled {
 protected:
  // Runs `capsule --socket S args...` with stdin from /dev/null (or `stdin_file`).
  Cli capsule(std::vector<std::string> args, const std::string& stdin_file = "/dev/null") {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args, {}, stdin_file);
  }
  std::string create_session(const fs::path& workspace, std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"session", "create", "-q", "-W", workspace.string()});
    const Cli created = capsule(flags);
    EXPECT_EQ(created.code, 0) << created.err;
    EXPECT_FALSE(created.out.empty());
    return created.out.substr(0, created.out.find('\n'));
  }
};

TEST_F(CapsuledSessionCli, ExecRelaysOutputAndExitsAsRunDoes) {
  start();
  const fs::path workspace = make_dir("ws");
  write_file(workspace / "a.txt", "one\n");
  fs::create_directories(workspace / "tests");
  write_file(workspace / "tests/t.txt", "guarded\n");
  const std::string id = create_session(workspace, {"--protect", "tests/**"});

  Cli o = capsule({"session", "exec", id, "--", "sh", "-c", "echo hi; cat /workspace/a.txt; echo err >&2"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "hi\none\n");
  EXPECT_NE(o.err.find("err\n"), std::string::npos);
  EXPECT_EQ(capsule({"session", "exec", id, "--", "sh", "-c", "exit 3"}).code, 3);
  EXPECT_EQ(capsule({"session", "exec", id, "--", "no-such-command-here"}).code, 127);
  EXPECT_EQ(capsule({"session", "exec", id, "--timeout", "1s", "--", "sleep", "30"}).code, 124);
  EXPECT_EQ(capsule({"session", "exec", id, "--idle-timeout", "1s", "--", "sleep", "30"}).code, 124);

  // State persists between execs; a script runs from a file, heredoc and all.
  EXPECT_EQ(capsule({"session", "exec", id, "--", "sh", "-c", "echo kept > /workspace/b.txt"}).code, 0);
  o = capsule({"session", "exec", id, "-c", "cat <<EOF\n$(cat /workspace/b.txt)\nEOF"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "kept\n");

  // stdin: bytes from a file, from ours with -i, else at EOF.
  write_file(dir_ / "in.txt", "fed\n");
  o = capsule({"session", "exec", id, "--stdin-file", (dir_ / "in.txt").string(), "--", "cat"});
  EXPECT_EQ(o.out, "fed\n");
  o = capsule({"session", "exec", id, "-i", "--", "cat"}, (dir_ / "in.txt").string());
  EXPECT_EQ(o.out, "fed\n");
  o = capsule({"session", "exec", id, "--", "cat"});
  EXPECT_EQ(o.code, 0);
  EXPECT_EQ(o.out, "");

  // Protected paths: no exec changes tests/.
  o = capsule({"session", "exec", id, "--", "sh", "-c", "echo bad > /workspace/tests/t.txt"});
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("Read-only file system"), std::string::npos) << o.err;
  EXPECT_EQ(capsule({"session", "exec", id, "--", "cat", "/workspace/tests/t.txt"}).out, "guarded\n");

  o = capsule({"session", "exec", "-it", id, "--", "sh"});  // stdin is /dev/null
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("stdin is not a terminal"), std::string::npos) << o.err;
  EXPECT_EQ(capsule({"session", "rm", id}).code, 0);
}

// Reads what `fd` gives for `limit` or until it ends.
std::string read_for(int fd, std::chrono::milliseconds limit) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, 50) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  return out;
}

TEST_F(CapsuledSessionCli, ExecOnATerminalTakesKeystrokesAndCtrlC) {
  start();
  const std::string id = create_session(make_dir("ws"));
  int terminal = -1;
  const pid_t pid = ::forkpty(&terminal, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string capsule = std::string(CAPSULE_BIN_DIR) + "/capsule";
    ::execl(capsule.c_str(), "capsule", "--socket", socket_.c_str(), "session", "exec", "-it", id.c_str(), "--", "sh",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Each step waits for what it expects before the next is typed.
  std::string seen;
  const auto expect_seen = [&](const std::string& part) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (seen.find(part) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      seen += read_for(terminal, 100ms);
    }
    EXPECT_NE(seen.find(part), std::string::npos) << "waiting for '" << part << "' in: " << seen;
  };
  const auto type = [&](const std::string& keys) { ASSERT_EQ(::write(terminal, keys.data(), keys.size()), ssize_t(keys.size())); };
  expect_seen("# ");
  type("tty; echo hello $((6*7))\r");
  expect_seen("hello 42");
  EXPECT_NE(seen.find("/dev/pts/"), std::string::npos) << seen;
  type("echo sleep''ing; sleep 60\r");
  expect_seen("sleeping\r\n");  // printed by the shell just before it starts sleep
  type("\x03");  // Ctrl-C reaches the foreground job, not the shell
  type("echo after-interrupt; exit 7\r");
  expect_seen("after-interrupt");
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (::waitpid(pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline) {
    seen += read_for(terminal, 100ms);
  }
  ::close(terminal);
  ASSERT_TRUE(WIFEXITED(status)) << status << "; " << seen;
  EXPECT_EQ(WEXITSTATUS(status), 7) << seen;
  EXPECT_EQ(capsule({"session", "rm", id}).code, 0);
}

TEST_F(CapsuledSessionCli, AttachFollowsABackgroundExecToItsExitStatus) {
  start();
  const std::string id = create_session(make_dir("ws"));
  Cli o = capsule({"session", "exec", "-d", id, "--", "sh", "-c",
                   "for i in 1 2 3 4 5; do echo line$i; sleep 0.3; done; echo oops >&2; exit 3"});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string exec_id = o.out.substr(0, o.out.find('\n'));
  ASSERT_FALSE(exec_id.empty());
  EXPECT_NE(o.err.find("capsule session attach " + id + " " + exec_id), std::string::npos) << o.err;

  const std::string all = "line1\nline2\nline3\nline4\nline5\n";
  o = capsule({"session", "attach", id, exec_id});  // most likely while it runs
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_EQ(o.out, all);
  EXPECT_TRUE(o.err.starts_with("oops\ncapsule: run " + exec_id + " failed")) << o.err;
  o = capsule({"session", "attach", id, exec_id, "--from", "6"});  // finished now: from its stored output
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_EQ(o.out, all.substr(6));
  o = capsule({"session", "attach", id, exec_id, "--from", "1000", "--stderr-from", "2"});
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_TRUE(o.err.starts_with("ps\ncapsule: run ")) << o.err;

  o = capsule({"session", "execs", id});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(o.out.starts_with("ID ")) << o.out;
  const std::string row = o.out.substr(o.out.find(exec_id));
  EXPECT_NE(row.find("failed   3 "), std::string::npos) << o.out;
  EXPECT_NE(row.find("sh -c 'for i in"), std::string::npos) << o.out;

  // Unknown exec or session: 125 and the daemon's reason; a bad offset: a usage error, also 125.
  o = capsule({"session", "attach", id, "no-such-exec"});
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.err, "capsule: not_found: session " + id + " has no exec no-such-exec\n");
  o = capsule({"session", "attach", "no-such-session", exec_id});
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("not_found"), std::string::npos) << o.err;
  o = capsule({"session", "attach", id, exec_id, "--from", "six"});
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("--from"), std::string::npos) << o.err;
  EXPECT_EQ(capsule({"session", "rm", id}).code, 0);
}

TEST_F(CapsuledSessionCli, KillEndsABackgroundExecByItsSignal) {
  start();
  const std::string id = create_session(make_dir("ws"));
  Cli o = capsule({"session", "exec", "-d", id, "--", "sleep", "1000"});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string exec_id = o.out.substr(0, o.out.find('\n'));
  o = capsule({"session", "kill", id, exec_id});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, exec_id + "\n");
  o = capsule({"session", "attach", id, exec_id});
  EXPECT_EQ(o.code, 128 + SIGTERM) << o.err;
  EXPECT_NE(o.err.find("capsule: run " + exec_id + " signaled"), std::string::npos) << o.err;
  const json run = json::parse(capsule({"runs", "show", exec_id}).out);
  EXPECT_EQ(run["state"], "signaled");
  EXPECT_EQ(run["result"]["signal"], SIGTERM);
  o = capsule({"session", "kill", id, exec_id, "--signal", "KILL"});  // it has ended
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.err.rfind("capsule: ", 0), 0u) << o.err;

  o = capsule({"session", "exec", "-d", id, "--", "sleep", "1000"});
  const std::string second = o.out.substr(0, o.out.find('\n'));
  EXPECT_EQ(capsule({"session", "kill", id, second, "-s", "sigkill"}).code, 0);
  EXPECT_EQ(capsule({"session", "attach", id, second}).code, 128 + SIGKILL);
  EXPECT_EQ(capsule({"session", "rm", id}).code, 0);
}

TEST_F(CapsuledSessionCli, CtrlCDetachesAttachAndTheExecKeepsRunning) {
  start();
  const std::string id = create_session(make_dir("ws"));
  Cli o = capsule({"session", "exec", "-d", id, "--", "sh", "-c", "echo first; exec sleep 1000"});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string exec_id = o.out.substr(0, o.out.find('\n'));
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const std::string err_path = (dir_ / "attach.err").string();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    const std::string capsule = std::string(CAPSULE_BIN_DIR) + "/capsule";
    ::execl(capsule.c_str(), "capsule", "--socket", socket_.c_str(), "session", "attach", id.c_str(),
            exec_id.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (seen.find("first\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    seen += read_for(out[0], 100ms);
  }
  EXPECT_EQ(seen, "first\n");
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(out[0]);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 130);
  EXPECT_NE(slurp(err_path).find("Re-attach: capsule session attach " + id + " " + exec_id + " --from 6\n"),
            std::string::npos) << slurp(err_path);
  EXPECT_EQ(json::parse(capsule({"runs", "show", exec_id}).out)["state"], "running");
  EXPECT_EQ(capsule({"session", "kill", id, exec_id}).code, 0);
  o = capsule({"session", "attach", id, exec_id, "--from", "6"});
  EXPECT_EQ(o.code, 128 + SIGTERM) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(capsule({"session", "rm", id}).code, 0);
}

TEST_F(CapsuledSessionCli, FilesDiffCheckpointResetAndRemoval) {
  start();
  const fs::path workspace = make_dir("ws");
  write_file(workspace / "src.txt", "start\n");
  const std::string id = create_session(workspace);

  // cp in: a file, a tree; cp out: a file, a tree.
  write_file(dir_ / "upload.bin", std::string("\0\xff bytes", 8));
  ASSERT_EQ(capsule({"session", "cp", (dir_ / "upload.bin").string(), id + ":/workspace/upload.bin"}).code, 0);
  const fs::path tree = make_dir("tree");
  fs::create_directories(tree / "sub");
  write_file(tree / "sub/x.txt", "x\n");
  ASSERT_EQ(capsule({"session", "cp", tree.string(), id + ":/workspace/tree"}).code, 0);
  Cli o = capsule({"session", "exec", id, "--", "cat", "/workspace/tree/sub/x.txt"});
  EXPECT_EQ(o.out, "x\n") << o.err;
  ASSERT_EQ(capsule({"session", "cp", id + ":/workspace/upload.bin", (dir_ / "back.bin").string()}).code, 0);
  EXPECT_EQ(slurp(dir_ / "back.bin"), std::string("\0\xff bytes", 8));
  ASSERT_EQ(capsule({"session", "cp", id + ":/workspace/tree", (dir_ / "tree-back").string()}).code, 0);
  EXPECT_EQ(slurp(dir_ / "tree-back/sub/x.txt"), "x\n");

  // The diff lists what changed.
  EXPECT_EQ(capsule({"session", "exec", id, "--", "sh", "-c", "echo changed > /workspace/src.txt"}).code, 0);
  o = capsule({"session", "diff", id});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("M src.txt"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("A upload.bin"), std::string::npos) << o.out;
  o = capsule({"session", "diff", id, "--patch"});
  EXPECT_NE(o.out.find("+changed"), std::string::npos) << o.out;

  // Checkpoint, change, reset to it, reset to the start.
  ASSERT_EQ(capsule({"session", "checkpoint", id, "cp1"}).code, 0);
  EXPECT_EQ(capsule({"session", "exec", id, "--", "sh", "-c", "echo later > /workspace/src.txt"}).code, 0);
  ASSERT_EQ(capsule({"session", "reset", id, "--to", "cp1"}).code, 0);
  EXPECT_EQ(capsule({"session", "exec", id, "--", "cat", "/workspace/src.txt"}).out, "changed\n");
  ASSERT_EQ(capsule({"session", "reset", id}).code, 0);
  EXPECT_EQ(capsule({"session", "exec", id, "--", "cat", "/workspace/src.txt"}).out, "start\n");
  EXPECT_EQ(slurp(workspace / "src.txt"), "start\n");  // cow: the host's copy never changed

  o = capsule({"session", "ls"});
  EXPECT_NE(o.out.find(id), std::string::npos) << o.out;
  o = capsule({"session", "show", id});
  EXPECT_EQ(json::parse(o.out)["id"], id);
  o = capsule({"session", "rm", id});
  EXPECT_EQ(o.code, 0);
  EXPECT_EQ(o.out, id + "\n");
  EXPECT_EQ(json::parse(capsule({"session", "show", id}).out)["state"], "deleted");
  o = capsule({"session", "exec", id, "--", "true"});
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.err.rfind("capsule: ", 0), 0u) << o.err;
}

// The evidence a run carries, from a session: real pytest's JUnit XML read into the exec's record, and a diff
// that leaves the build's output out so the edit shows.
TEST_F(CapsuledSessionCli, ExecCollectsPytestsReportAndTheDiffLeavesOutExcludedPaths) {
  // The sandbox sees the host's /usr: Debian's python3 and its packages.
  if (std::system("/usr/bin/python3 -c 'import pytest' 2>/dev/null") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with pytest is not installed (scripts/install-deps.sh)";
  }
  start();
  const fs::path workspace = make_dir("pyproject");
  write_file(workspace / "app.py", "def add(a, b):\n    return a + b\n");
  fs::create_directories(workspace / "tests");
  write_file(workspace / "tests/test_app.py",
             "import pytest\nfrom app import add\n\n"
             "def test_adds():\n    assert add(2, 3) == 5\n\n"
             "def test_negative():\n    assert add(-2, 1) == -3, 'minus'\n\n"
             "@pytest.mark.skip(reason='later')\ndef test_later():\n    pass\n");
  const std::string id = create_session(workspace);
  const std::vector<std::string> pytest = {"session", "exec", id, "--json", "--junit", "build/junit.xml", "-e",
                                           "PYTHONPATH=/workspace", "-e", "PYTHONDONTWRITEBYTECODE=1", "--",
                                           "python3", "-m", "pytest", "-p", "no:cacheprovider",
                                           "--junitxml=build/junit.xml", "tests"};
  Cli o = capsule(pytest);
  EXPECT_EQ(o.code, 1) << o.err;
  json run = json::parse(o.out);
  EXPECT_EQ(run["state"], "failed") << run["result"];
  EXPECT_EQ(run["spec"]["collect"]["junit"], json({"build/junit.xml"}));
  json tests = run["tests"];
  EXPECT_EQ(tests["state"], "reports") << tests;
  EXPECT_EQ(tests["total"], 3) << tests;
  EXPECT_EQ(tests["failed"], 1) << tests;
  EXPECT_EQ(tests["skipped"], 1) << tests;
  ASSERT_EQ(tests["cases"].size(), 3u) << tests;
  EXPECT_EQ(tests["cases"][1]["name"], "test_negative");
  EXPECT_NE(tests["cases"][1]["message"].get<std::string>().find("minus"), std::string::npos) << tests;
  EXPECT_EQ(run["diff"]["added"][0]["path"], "build/junit.xml") << run["diff"];
  EXPECT_EQ(capsule({"session", "show", id}).code, 0);
  EXPECT_EQ(json::parse(capsule({"session", "exec", id, "--json", "--", "true"}).out)["tests"], nullptr)
      << "an exec that collects nothing has no tests";

  // The fix, and the next exec's own report: the record reads the report the exec rewrote.
  ASSERT_EQ(capsule({"session", "exec", id, "--", "sed", "-i", "s/return a + b/return a + b if a >= 0 else a - b/",
                     "/workspace/app.py"}).code, 0);
  o = capsule(pytest);
  EXPECT_EQ(o.code, 0) << o.err;
  tests = json::parse(o.out)["tests"];
  EXPECT_EQ(tests["total"], 3) << tests;
  EXPECT_EQ(tests["failed"], 0) << tests;

  // A build's output buries the edit; --exclude leaves it out, --include shows only what it names.
  ASSERT_EQ(capsule({"session", "exec", id, "-c",
                     "mkdir -p /workspace/build/lib && for i in $(seq 1 40); do echo $i > /workspace/build/lib/m$i.txt; "
                     "done"}).code, 0);
  o = capsule({"session", "diff", id, "--patch"});
  EXPECT_NE(o.out.find("A build/lib/m17.txt"), std::string::npos) << o.out;
  o = capsule({"session", "diff", id, "--patch", "--exclude", "build/**"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.find("build/"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("M app.py"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("+    return a + b if a >= 0 else a - b"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("# 41 changed paths left out by --include/--exclude"), std::string::npos) << o.out;
  o = capsule({"session", "diff", id, "--json", "--include", "build", "--exclude", "build/lib/m1*"});
  const json filtered = json::parse(o.out);
  EXPECT_EQ(filtered["added"].size(), 30u) << filtered;  // junit.xml, m2..m9 and m20..m40
  EXPECT_TRUE(filtered["modified"].empty()) << filtered;
  EXPECT_EQ(filtered["filter"]["left_out"], 12) << filtered;  // app.py, m1 and m10..m19
  EXPECT_EQ(filtered["totals"]["added"], 30) << filtered;
  o = capsule({"session", "diff", id, "--exclude", "/etc"});
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("invalid_query: exclude: '/etc' must be relative to the workspace"), std::string::npos) << o.err;
  EXPECT_EQ(capsule({"session", "rm", id}).code, 0);
}

// An exec whose command exited 0 but whose verdict fails exits 123, as `capsule run` does: a file planted under
// the session's --protect globs, or test cases lost against --baseline.
TEST_F(CapsuledSessionCli, ExecExits123ForAPlantedProtectedFileOrLostBaselineCases) {
  start();
  const fs::path workspace = make_dir("ws");
  const std::string protected_id = create_session(workspace, {"--protect", "conftest.py"});
  EXPECT_EQ(capsule({"session", "exec", protected_id, "--", "touch", "/workspace/helper.py"}).code, 0);
  const Cli planted = capsule({"session", "exec", protected_id, "--json", "--", "touch", "/workspace/conftest.py"});
  EXPECT_EQ(planted.code, 123) << planted.err;
  EXPECT_EQ(json::parse(planted.out)["protect_violations"][0]["path"], "conftest.py") << planted.out;

  json spec = sh("printf '<testsuite><testcase classname=\"t\" name=\"one\"/><testcase classname=\"t\" "
                 "name=\"two\"/></testsuite>' > /workspace/junit.xml");
  spec["workspace"] = {{"path", workspace.string()}};
  spec["collect"] = {{"junit", {"junit.xml"}}};
  const json baseline = run_and_wait(spec);
  ASSERT_EQ(baseline["tests"]["total"], 2) << baseline;
  const std::string id = create_session(workspace);
  const std::vector<std::string> one_case = {
      "/bin/sh", "-c", "printf '<testsuite><testcase classname=\"t\" name=\"one\"/></testsuite>' > /workspace/junit.xml"};
  std::vector<std::string> lost = {"session", "exec", id, "--junit", "junit.xml", "--baseline", baseline["id"], "--"};
  lost.insert(lost.end(), one_case.begin(), one_case.end());
  const Cli regressed = capsule(lost);
  EXPECT_EQ(regressed.code, 123) << regressed.err;
  lost.insert(lost.begin() + 7, "--allow-removed");
  EXPECT_EQ(capsule(lost).code, 0) << "--allow-removed lists the loss without failing for it";
}

}  // namespace
}  // namespace capsule::testing

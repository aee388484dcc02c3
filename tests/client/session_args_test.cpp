// Tests of `capsule session ...` as a user types it: each subcommand's flags and positionals, the SessionSpec and
// ExecSpec bodies they build, `ID:/path`, the refusal of -t, the diff listing, and exec against a scripted daemon.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "client/cli_session.h"
#include "client/session_files.h"
#include "tests/support/scripted_server.h"

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// `capsule session <args>` parsed as main does it: CLI11 sees what precedes the first "--".
class SessionArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    add_session_commands(app_, c_);
    app_.require_subcommand(1);
  }
  void parse(std::vector<std::string> args) {
    const auto cut = std::find(args.begin(), args.end(), "--");
    separator_ = cut != args.end();
    if (separator_) after_.assign(cut + 1, args.end());
    std::vector<std::string> before(args.begin(), cut);
    before.insert(before.begin(), "session");
    std::reverse(before.begin(), before.end());
    app_.parse(before);
    if (c_.exec->parsed()) c_.exec_options.argv = command_argv(c_.exec->remaining(), separator_, after_);
  }

  CLI::App app_{"test"};
  SessionCommands c_;
  bool separator_ = false;
  std::vector<std::string> after_;
};

fs::path temp_file(const std::string& content) {
  char name[] = "/tmp/capsule-session-test-XXXXXX";
  const int fd = ::mkstemp(name);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, content.data(), content.size()), ssize_t(content.size()));
  ::close(fd);
  return name;
}

TEST_F(SessionArgs, CreateWithoutFlagsIsAnEmptySpec) {
  parse({"create"});
  ASSERT_TRUE(c_.create->parsed());
  EXPECT_EQ(build_session_body(c_.create_options), json::object());
}

TEST_F(SessionArgs, CreateMapsEveryFlagToItsSessionSpecField) {
  parse({"create", "jdk17", "-W", "/srv/project/", "--mode", "cow", "-w", "/workspace/sub", "--timeout", "10m",
         "--cpu-time", "5m", "--kill-grace", "20s", "-m", "4g", "--cpus", "2", "--pids", "256", "--disk", "2g", "-e", "A=1", "-l",
         "suite=agent", "--layer", "py:3.12", "--layer", "tools", "--protect", "src/test/**", "--protect",
         "tests/**", "--ttl", "2h", "--idle-ttl", "15m", "--on-expiry", "freeze", "--persist-shell-state",
         "--network", "none", "--policy", "build", "--json"});
  EXPECT_EQ(build_session_body(c_.create_options), json::parse(R"({
    "image": "jdk17",
    "workspace": {"path": "/srv/project", "mode": "cow"},
    "cwd": "/workspace/sub",
    "limits": {"wall_time": "10m", "cpu_time": "5m", "kill_grace": "20s", "memory": "4g", "cpus": 2.0, "pids": 256,
               "disk": "2g"},
    "env": {"A": "1"},
    "labels": {"suite": "agent"},
    "layers": ["py:3.12", "tools"],
    "protect": ["src/test/**", "tests/**"],
    "ttl": "2h", "idle_ttl": "15m", "on_expiry": "freeze",
    "persist_shell_state": true,
    "network": "none",
    "policy": "build"
  })"));
  EXPECT_TRUE(c_.create_options.json);
  EXPECT_FALSE(c_.create_options.quiet);
}

TEST_F(SessionArgs, CreateByToolchainQuietly) {
  parse({"create", "-t", "python=auto", "--as-of", "2024-03-01", "-q"});
  EXPECT_EQ(build_session_body(c_.create_options),
            json::parse(R"({"toolchains": {"python": "auto"}, "as_of": "2024-03-01"})"));
  EXPECT_TRUE(c_.create_options.quiet);
}

TEST_F(SessionArgs, CreateRefusesBadValues) {
  EXPECT_THROW(parse({"create", "--on-expiry", "explode"}), CLI::ValidationError);
  SessionCreateOptions mode_alone;
  mode_alone.run.mode = "ro";
  EXPECT_THROW(build_session_body(mode_alone), std::invalid_argument);
  SessionCreateOptions bad_label;
  bad_label.run.labels = {"novalue"};
  EXPECT_THROW(build_session_body(bad_label), std::invalid_argument);
  EXPECT_THROW(parse({"create", "--no-such-flag"}), CLI::ParseError);
}

TEST_F(SessionArgs, ExecTakesTheCommandAfterTheSeparator) {
  parse({"exec", "s1", "--timeout", "30s", "--idle-timeout", "5s", "--cwd", "/workspace/a", "-e", "K=V", "-l",
         "step=3", "--", "make", "-k", "--", "test"});
  ASSERT_TRUE(c_.exec->parsed());
  EXPECT_EQ(c_.exec_options.id, "s1");
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({
    "argv": ["make", "-k", "--", "test"], "cwd": "/workspace/a", "env": {"K": "V"}, "labels": {"step": "3"},
    "timeout": "30s", "idle_timeout": "5s"
  })"));
}

TEST_F(SessionArgs, ExecTakesACommandWithoutTheSeparator) {
  parse({"exec", "s1", "ls", "-la", "/"});
  EXPECT_EQ(c_.exec_options.id, "s1");
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({"argv": ["ls", "-la", "/"]})"));
}

TEST_F(SessionArgs, ExecBackgroundAndJson) {
  parse({"exec", "s1", "-d", "--json", "--", "sleep", "60"});
  EXPECT_TRUE(c_.exec_options.json);
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({"argv": ["sleep", "60"], "background": true})"));
}

TEST_F(SessionArgs, ExecLimitsTravelAsTyped) {
  parse({"exec", "s1", "--timeout", "90s", "--idle-timeout", "5m", "--kill-grace", "10s", "--", "make"});
  EXPECT_EQ(build_exec_body(c_.exec_options),
            json::parse(R"({"argv": ["make"], "timeout": "90s", "idle_timeout": "5m", "kill_grace": "10s"})"));
}

TEST_F(SessionArgs, ExecScriptFromTextOrFile) {
  parse({"exec", "s1", "-c", "cd src && make"});
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({"script": "cd src && make"})"));

  const fs::path script = temp_file("cat <<EOF\nheredoc\nEOF\n");
  SessionCommands other;
  CLI::App app{"test"};
  add_session_commands(app, other);
  app.parse(std::vector<std::string>{script.string(), "--script", "s1", "exec", "session"});
  EXPECT_EQ(build_exec_body(other.exec_options), json::parse(R"({"script": "cat <<EOF\nheredoc\nEOF\n"})"));
  fs::remove(script);
}

TEST_F(SessionArgs, ExecStdinBytesTravelAsBase64) {
  const fs::path input = temp_file(std::string("a\0\xff\n", 4));
  parse({"exec", "s1", "--stdin-file", input.string(), "--", "cat"});
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({"argv": ["cat"], "stdin_b64": "YQD/Cg=="})"));
  c_.exec_options.stdin_data = "x";  // as -i fills it
  EXPECT_THROW(build_exec_body(c_.exec_options), std::invalid_argument);
  c_.exec_options.stdin_file.clear();
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({"argv": ["cat"], "stdin_b64": "eA=="})"));
  fs::remove(input);
}

TEST_F(SessionArgs, ExecNeedsExactlyOneOfCommandAndScript) {
  parse({"exec", "s1"});
  EXPECT_THROW(build_exec_body(c_.exec_options), std::invalid_argument);
  c_.exec_options.script = "true";
  c_.exec_options.argv = {"true"};
  EXPECT_THROW(build_exec_body(c_.exec_options), std::invalid_argument);
  c_.exec_options.argv.clear();
  c_.exec_options.script_file = "/nonexistent/script.sh";
  EXPECT_THROW(build_exec_body(c_.exec_options), std::invalid_argument);
  c_.exec_options.script.clear();
  EXPECT_THROW(build_exec_body(c_.exec_options), std::runtime_error);  // unreadable file
  EXPECT_THROW(parse({"exec"}), CLI::RequiredError);
}

TEST_F(SessionArgs, ExecWithATerminalNeedsOneOnStdin) {
  parse({"exec", "-it", "s1", "--", "bash"});
  EXPECT_TRUE(c_.exec_options.tty);
  EXPECT_TRUE(c_.exec_options.interactive);
  // stdin is /dev/null: refused before any request (the socket does not exist) and without reading stdin.
  const int saved_stdin = ::dup(STDIN_FILENO);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ::dup2(null_fd, STDIN_FILENO);
  ::testing::internal::CaptureStderr();
  const int code = cmd_session("/nonexistent/capsule.sock", c_, separator_, after_);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::dup2(saved_stdin, STDIN_FILENO);
  ::close(saved_stdin);
  ::close(null_fd);
  EXPECT_EQ(code, 125);
  EXPECT_EQ(err, "capsule: session exec -t: stdin is not a terminal\n");
}

TEST_F(SessionArgs, ExecWithATerminalIsNotForTheBackgroundNorAStdinFile) {
  parse({"exec", "-t", "-d", "s1", "--", "top"});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session("/nonexistent/capsule.sock", c_, separator_, after_), 125);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("not with --background"), std::string::npos);
  c_.exec_options.background = false;
  c_.exec_options.stdin_file = "/etc/hostname";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session("/nonexistent/capsule.sock", c_, separator_, after_), 125);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("--stdin-file"), std::string::npos);
}

TEST_F(SessionArgs, OtherSubcommandsRefuseWordsAfterTheSeparator) {
  parse({"show", "s1", "--", "x"});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session("/nonexistent/capsule.sock", c_, separator_, after_), 125);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("unexpected arguments after --"), std::string::npos);
}

TEST_F(SessionArgs, DaemonUnreachableExits125WithTheReason) {
  parse({"ls"});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session("/nonexistent/capsule.sock", c_, separator_, after_), 125);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("capsule: cannot connect to capsuled at /nonexistent"),
            std::string::npos);
}

// An HTTP answer with `body` and `type`.
std::string answer(const std::string& status, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

TEST_F(SessionArgs, ExecRelaysTheOutputAndExitsByTheRunsEnding) {
  std::string received;
  capsule::testing::ScriptedServer server([&](int fd, const std::string& head) {
    received = head;
    capsule::testing::read_body(fd, received);
    capsule::testing::ScriptedServer::send(fd, answer("200 OK", "application/x-ndjson",
        R"({"event":"started","id":"e1"})" "\n"
        R"({"event":"stdout","id":"e1","data_b64":"aGkK"})" "\n"
        R"({"event":"stderr","id":"e1","data_b64":"ZXJyCg=="})" "\n"
        R"({"event":"finished","id":"e1","run":{"id":"e1","state":"idle_timed_out","result":{"wall_ms":1500}}})" "\n"));
  });
  parse({"exec", "s1", "--idle-timeout", "1s", "--", "sh", "-c", "echo hi; sleep 9"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session(server.path(), c_, separator_, after_), 124);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "hi\n");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(err.starts_with("err\ncapsule: run e1 idle_timed_out in 1.50 s")) << err;
  EXPECT_TRUE(received.starts_with("POST /v1/sessions/s1/exec HTTP/1.1\r\n")) << received;
  EXPECT_NE(received.find("Accept: application/x-ndjson\r\n"), std::string::npos);
  EXPECT_EQ(json::parse(received.substr(received.find("\r\n\r\n") + 4)),
            json::parse(R"({"argv": ["sh", "-c", "echo hi; sleep 9"], "idle_timeout": "1s"})"));
}

TEST_F(SessionArgs, ExecInTheBackgroundPrintsTheExecId) {
  capsule::testing::ScriptedServer server([&](int fd, const std::string& head) {
    std::string request = head;
    capsule::testing::read_body(fd, request);
    capsule::testing::ScriptedServer::send(fd, answer("202 Accepted", "application/json", R"({"id":"e9"})"));
  });
  parse({"exec", "s1", "-d", "--", "sleep", "60"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session(server.path(), c_, separator_, after_), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "e9\n");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("capsule session attach s1 e9"), std::string::npos) << err;
  EXPECT_NE(err.find("capsule session kill s1 e9"), std::string::npos) << err;
}

TEST_F(SessionArgs, AttachTakesOffsetsOfBothStreams) {
  parse({"attach", "s1", "e1", "--from", "12", "--stderr-from", "3"});
  ASSERT_TRUE(c_.attach->parsed());
  EXPECT_EQ(c_.id, "s1");
  EXPECT_EQ(c_.exec_id, "e1");
  EXPECT_EQ(c_.attach_from.stdout_from, 12u);
  EXPECT_EQ(c_.attach_from.stderr_from, 3u);
  EXPECT_EQ(attach_command("s1", "e1", c_.attach_from), "capsule session attach s1 e1 --from 12 --stderr-from 3");
  EXPECT_EQ(attach_command("s1", "e1", {0, 0}), "capsule session attach s1 e1");
}

TEST_F(SessionArgs, AttachRefusesABadOffset) {
  EXPECT_THROW(parse({"attach", "s1", "e1", "--from", "x"}), CLI::ParseError);
  EXPECT_THROW(parse({"attach", "s1", "e1", "--from", "-3"}), CLI::ParseError);
  EXPECT_THROW(parse({"attach", "s1"}), CLI::RequiredError);
}

TEST_F(SessionArgs, SignalNamesAndNumbers) {
  EXPECT_EQ(signal_value("TERM"), "TERM");
  EXPECT_EQ(signal_value("sigkill"), "KILL");
  EXPECT_EQ(signal_value("Int"), "INT");
  EXPECT_EQ(signal_value("9"), 9);
  EXPECT_EQ(signal_value("99999"), "99999");  // not a signal number: the daemon says why
}

TEST_F(SessionArgs, KillPostsTheSignal) {
  std::string received;
  capsule::testing::ScriptedServer server([&](int fd, const std::string& head) {
    received = head;
    capsule::testing::read_body(fd, received);
    capsule::testing::ScriptedServer::send(fd, answer("202 Accepted", "application/json", R"({"id":"e1","signal":9})"));
  });
  parse({"kill", "s1", "e1", "--signal", "KILL"});
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(cmd_session(server.path(), c_, separator_, after_), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "e1\n");
  EXPECT_TRUE(received.starts_with("POST /v1/sessions/s1/execs/e1/signal HTTP/1.1\r\n")) << received;
  EXPECT_EQ(json::parse(received.substr(received.find("\r\n\r\n") + 4)), json::parse(R"({"signal": "KILL"})"));
}

TEST_F(SessionArgs, AttachToAnUnknownExecExits125) {
  capsule::testing::ScriptedServer server([&](int fd, const std::string& head) {
    std::string request = head;
    capsule::testing::read_body(fd, request);
    capsule::testing::ScriptedServer::send(fd, answer("404 Not Found", "application/json",
        R"({"error":{"code":"not_found","message":"session s1 has no exec e7"}})"));
  });
  parse({"attach", "s1", "e7"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session(server.path(), c_, separator_, after_), 125);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "capsule: not_found: session s1 has no exec e7\n");
}

TEST_F(SessionArgs, DaemonErrorsShowCodeAndMessageAndExit125) {
  capsule::testing::ScriptedServer server([&](int fd, const std::string& head) {
    std::string request = head;
    capsule::testing::read_body(fd, request);
    capsule::testing::ScriptedServer::send(fd, answer("404 Not Found", "application/json",
        R"({"error":{"code":"session_not_found","message":"no session s1"}})"));
  });
  parse({"exec", "s1", "--", "true"});
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session(server.path(), c_, separator_, after_), 125);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "capsule: session_not_found: no session s1\n");
}

TEST_F(SessionArgs, ListingFilters) {
  parse({"ls", "--state", "ready", "--label", "k=v", "--json"});
  ASSERT_TRUE(c_.ls->parsed());
  EXPECT_EQ(c_.state, "ready");
  EXPECT_EQ(c_.label, "k=v");
  EXPECT_TRUE(c_.json);
}

TEST_F(SessionArgs, ShowTakesAnId) {
  parse({"show", "s1"});
  EXPECT_TRUE(c_.show->parsed());
  EXPECT_EQ(c_.id, "s1");
}

TEST_F(SessionArgs, DiffWithPatch) {
  parse({"diff", "s2", "--patch"});
  EXPECT_TRUE(c_.diff->parsed());
  EXPECT_EQ(c_.id, "s2");
  EXPECT_TRUE(c_.patch);
  EXPECT_FALSE(c_.json);
}

TEST_F(SessionArgs, DiffFiltersTravelAsRepeatedQueryParameters) {
  parse({"diff", "s2", "--patch", "--exclude", "target/**", "--exclude", "*.log", "--include", "src dir/**"});
  EXPECT_EQ(c_.diff_exclude, (std::vector<std::string>{"target/**", "*.log"}));
  EXPECT_EQ(c_.diff_include, (std::vector<std::string>{"src dir/**"}));
  EXPECT_EQ(session_diff_target(c_.id, c_.patch, c_.diff_include, c_.diff_exclude),
            "/v1/sessions/s2/diff?patch=1&include=src%20dir%2F%2A%2A&exclude=target%2F%2A%2A&exclude=%2A.log");
  EXPECT_EQ(session_diff_target("s2", false, {}, {}), "/v1/sessions/s2/diff");
  EXPECT_EQ(session_diff_target("s2", false, {}, {"a"}), "/v1/sessions/s2/diff?exclude=a");
}

TEST_F(SessionArgs, ExecCollectsAsARunDoes) {
  parse({"exec", "s1", "--junit", "build/junit.xml", "--junit", "target/surefire-reports/*.xml", "--collect-coverage",
         "build/coverage.xml", "--collect-classfiles", "target/classes/**/*.class", "--tail-lines", "5", "--",
         "python3", "-m", "pytest"});
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({
    "argv": ["python3", "-m", "pytest"],
    "collect": {"junit": ["build/junit.xml", "target/surefire-reports/*.xml"], "coverage": ["build/coverage.xml"],
                "classfiles": ["target/classes/**/*.class"], "tail_lines": 5}
  })"));
}

TEST_F(SessionArgs, ExecTakesABaselineAsARunDoes) {
  parse({"exec", "s1", "--junit", "junit.xml", "--baseline", "r-1", "--allow-removed", "--", "pytest"});
  EXPECT_EQ(build_exec_body(c_.exec_options), json::parse(R"({
    "argv": ["pytest"],
    "collect": {"junit": ["junit.xml"]},
    "baseline": {"run": "r-1", "allow_removed": true}
  })"));
}

TEST_F(SessionArgs, ExecAllowRemovedNeedsABaseline) {
  parse({"exec", "s1", "--junit", "junit.xml", "--allow-removed", "--", "pytest"});
  EXPECT_THROW(build_exec_body(c_.exec_options), std::invalid_argument) << "--allow-removed needs --baseline";
}

TEST_F(SessionArgs, NetworkSwitchPostsTheMode) {
  std::string received;
  capsule::testing::ScriptedServer server([&](int fd, const std::string& head) {
    received = head;
    capsule::testing::read_body(fd, received);
    capsule::testing::ScriptedServer::send(fd, answer("200 OK", "application/json", R"({"id":"s1","network":"none"})"));
  });
  parse({"network", "s1", "none"});
  ASSERT_TRUE(c_.network->parsed());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cmd_session(server.path(), c_, separator_, after_), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "capsule: session s1 network none\n");
  EXPECT_TRUE(received.starts_with("POST /v1/sessions/s1/network HTTP/1.1\r\n")) << received;
  EXPECT_EQ(json::parse(received.substr(received.find("\r\n\r\n") + 4)), json::parse(R"({"mode": "none"})"));
  EXPECT_THROW(parse({"network", "s1", "host"}), CLI::ParseError);
}

TEST_F(SessionArgs, ResetToACheckpoint) {
  parse({"reset", "s3", "--to", "before-refactor"});
  EXPECT_TRUE(c_.reset->parsed());
  EXPECT_EQ(c_.id, "s3");
  EXPECT_EQ(c_.to, "before-refactor");
}

TEST_F(SessionArgs, CheckpointNeedsAName) {
  EXPECT_THROW(parse({"checkpoint", "s4"}), CLI::RequiredError);
}

TEST_F(SessionArgs, CheckpointIdAndName) {
  parse({"checkpoint", "s4", "green"});
  EXPECT_TRUE(c_.checkpoint->parsed());
  EXPECT_EQ(c_.id, "s4");
  EXPECT_EQ(c_.name, "green");
}

TEST_F(SessionArgs, RmTakesSeveralIds) {
  parse({"rm", "s5", "s6"});
  EXPECT_TRUE(c_.rm->parsed());
  EXPECT_EQ(c_.ids, (std::vector<std::string>{"s5", "s6"}));
}

TEST_F(SessionArgs, CpTakesSourceAndDestination) {
  parse({"cp", "./src", "s7:/workspace/src"});
  EXPECT_TRUE(c_.cp->parsed());
  EXPECT_EQ(c_.source, "./src");
  EXPECT_EQ(c_.destination, "s7:/workspace/src");
  EXPECT_THROW(parse({"cp", "only-one"}), CLI::ParseError);
}

TEST(SessionPath, RemoteSidesAreIdColonPath) {
  const auto remote = parse_session_path("s7:/workspace/out.txt");
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->id, "s7");
  EXPECT_EQ(remote->path, "/workspace/out.txt");
  EXPECT_EQ(parse_session_path("s7:relative/x")->path, "relative/x");
  EXPECT_FALSE(parse_session_path("plain/file"));
  EXPECT_FALSE(parse_session_path("./a:b"));
  EXPECT_FALSE(parse_session_path("/abs/a:b"));
  EXPECT_FALSE(parse_session_path(":x"));
  EXPECT_THROW(parse_session_path("s7:"), std::invalid_argument);
}

TEST(SessionPath, CpNeedsExactlyOneRemoteSide) {
  EXPECT_THROW(cmd_session_cp("/nonexistent/capsule.sock", "a", "b"), std::invalid_argument);
  EXPECT_THROW(cmd_session_cp("/nonexistent/capsule.sock", "s1:/a", "s2:/b"), std::invalid_argument);
}

TEST(SessionDiff, ListsChangesThenTheirPatches) {
  const json diff = json::parse(R"({
    "added": [{"path": "new.txt", "size": 3}, {"path": "logo.png", "size": 9}],
    "modified": [{"path": "src/a.c", "size": 10}, {"path": "huge.log", "size": 99}],
    "deleted": [{"path": "old.txt", "size": 1}],
    "patches": [
      {"path": "huge.log", "status": "modified", "binary": false, "too_large": true, "reason": "over 1 MiB"},
      {"path": "logo.png", "status": "added", "binary": true},
      {"path": "new.txt", "status": "added", "binary": false, "patch": "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n"},
      {"path": "old.txt", "status": "deleted", "binary": false, "omitted": true},
      {"path": "src/a.c", "status": "modified", "binary": false, "patch": "--- a/src/a.c\n+++ b/src/a.c\n"}
    ],
    "truncated": false
  })");
  const std::string listing = "A new.txt\nA logo.png (binary)\nM src/a.c\nM huge.log\nD old.txt\n";
  EXPECT_EQ(format_session_diff(diff, false), listing);
  EXPECT_EQ(format_session_diff(diff, true),
            listing + "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\nBinary file logo.png differs\n"
                      "--- a/src/a.c\n+++ b/src/a.c\n# huge.log: no patch: over 1 MiB\n"
                      "# old.txt: no patch: the response's limit was reached\n");
}

TEST(SessionDiff, SaysWhenTheListIsTruncated) {
  const json diff = json::parse(R"({"added": [{"path": "a"}], "modified": [], "deleted": [], "truncated": true,
                                    "totals": {"added": 5000, "modified": 2, "deleted": 0}})");
  EXPECT_EQ(format_session_diff(diff, false),
            "A a\n# only part of the changes is listed: 5000 added, 2 modified, 0 deleted in all\n");
}

TEST(SessionDiff, SaysWhatTheFiltersLeftOut) {
  const json diff = json::parse(R"({"added": [], "modified": [{"path": "pom.xml"}], "deleted": [], "truncated": false,
                                    "totals": {"added": 0, "modified": 1, "deleted": 0},
                                    "filter": {"include": [], "exclude": ["target"], "left_out": 412}})");
  EXPECT_EQ(format_session_diff(diff, false), "M pom.xml\n# 412 changed paths left out by --include/--exclude\n");
}

}  // namespace
}  // namespace capsule::client

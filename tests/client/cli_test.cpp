// Tests of the capsule CLI's binaries: the real `capsule` against a real capsuled, and `capsule-launch`
// (skipped when they are not built). The HTTP client they share is tested in tests/http/unix_client_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "client/cli_daemon.h"
#include "client/run_view.h"
#include "http/unix_client.h"
#include "install_layout.h"
#include "tests/support/test_support.h"

#ifndef CAPSULE_BIN_DIR
#define CAPSULE_BIN_DIR ""
#endif

extern char** environ;

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------
// The real binaries: capsuled on a temp socket, `capsule` run as a child process.

struct Outcome {
  int code = -1;
  std::string out, err;
};

using capsule::testing::slurp;

pid_t spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err,
            const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env_strings = extra_env;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  std::vector<char*> env, argv;
  for (auto& item : env_strings) env.push_back(item.data());
  env.push_back(nullptr);
  std::vector<std::string> copy = args;
  for (auto& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(error, 0) << args[0];
  return pid;
}

int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "pid " << pid << " did not exit within " << limit.count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs args to its end with stdout and stderr in dir/out and dir/err.
Outcome run_to_end(const std::vector<std::string>& args, const fs::path& dir, std::chrono::seconds limit) {
  const pid_t pid = spawn(args, dir / "out", dir / "err");
  Outcome outcome;
  outcome.code = wait_exit(pid, limit);
  outcome.out = slurp(dir / "out");
  outcome.err = slurp(dir / "err");
  return outcome;
}

// Running and not a zombie (an auto-started daemon is reparented; its new parent reaps it).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

class CliWithDaemon : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path capsuled = fs::path(CAPSULE_BIN_DIR) / "capsuled";
    if (std::string(CAPSULE_BIN_DIR).empty() || !fs::exists(capsuled)) return;
    char pattern[] = "/tmp/capsule-cli-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    socket_ = dir_ / "s.sock";
    daemon_ = spawn({capsuled.string(), "--socket", socket_.string(), "--state-dir", (dir_ / "state").string(),
                     "--foreground"},
                    dir_ / "capsuled.out", dir_ / "capsuled.log");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        if (http::HttpClient(socket_.string()).request("GET", "/v1/health").status == 200) return;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "capsuled did not answer on " << socket_ << "; log:\n" << slurp(dir_ / "capsuled.log");
  }
  static void TearDownTestSuite() {
    if (daemon_ > 0) {
      ::kill(daemon_, SIGTERM);
      wait_exit(daemon_, std::chrono::seconds(60));
      daemon_ = -1;
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (daemon_ <= 0) GTEST_SKIP() << "capsuled is not built at " << CAPSULE_BIN_DIR;
  }

  static Outcome capsule(std::vector<std::string> args, std::chrono::seconds limit = std::chrono::seconds(60)) {
    args.insert(args.begin(), {(fs::path(CAPSULE_BIN_DIR) / "capsule").string(), "--socket", socket_.string()});
    return run_to_end(args, dir_, limit);
  }
  static json api(const std::string& method, const std::string& target) {
    return http::request_json(http::HttpClient(socket_.string()), method, target);
  }
  static std::string unique_label() {
    static int n = 0;
    return "cli-test=" + std::to_string(::getpid()) + "-" + std::to_string(++n);
  }

  static inline fs::path dir_;
  static inline fs::path socket_;
  static inline pid_t daemon_ = -1;
};

TEST_F(CliWithDaemon, RunStreamsOutputAndExitsWithTheCommandsCode) {
  const Outcome o = capsule({"run", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3"});
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_EQ(o.out, "hi\n");
  EXPECT_NE(o.err.find("oops\n"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(" failed in "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(exit 3)"), std::string::npos) << o.err;
}

// Every byte value, then a 4-byte UTF-8 character split across two writes: the CLI's stdout is exactly that.
TEST_F(CliWithDaemon, RunRelaysOutputBytesExactly) {
  const std::string script =
      "i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; i=$((i+1)); done; "
      "printf '\\360\\237'; sleep 0.2; printf '\\230\\200'; printf '\\377' >&2";
  const Outcome o = capsule({"run", "--", "sh", "-c", script});
  ASSERT_EQ(o.code, 0) << o.err;
  std::string expected;
  for (int i = 0; i < 256; ++i) expected += static_cast<char>(i);
  expected += "\xF0\x9F\x98\x80";
  EXPECT_EQ(o.out, expected);
  EXPECT_EQ(o.err.substr(0, 1), "\xFF");
}

// 1 MiB of control bytes read by a slow consumer: the events and the finished run object stay small enough
// that the daemon keeps the stream (it used to fall 8 MiB behind and drop it: exit 125).
TEST_F(CliWithDaemon, MebibyteOfControlBytesToASlowReaderExitsZero) {
  const std::string capsule_bin = (fs::path(CAPSULE_BIN_DIR) / "capsule").string();
  const std::string pipeline = capsule_bin + " --socket " + socket_.string() +
                               " run -- sh -c 'head -c 1048576 /dev/zero | tr \"\\0\" \"\\1\"'"
                               " 2>" + (dir_ / "slow.err").string() + "; echo $? >" + (dir_ / "slow.code").string();
  const pid_t pid = spawn({"/bin/sh", "-c", "(" + pipeline + ") | (sleep 3; cat > " + (dir_ / "slow.out").string() + ")"},
                          dir_ / "out", dir_ / "err");
  ASSERT_EQ(wait_exit(pid, std::chrono::seconds(120)), 0);
  EXPECT_EQ(slurp(dir_ / "slow.code"), "0\n") << slurp(dir_ / "slow.err");
  EXPECT_EQ(slurp(dir_ / "slow.out"), std::string(1 << 20, '\1'));
}

// A reader that stalls while the command floods: whatever the daemon could relay, `capsule run` never passes
// an incomplete stdout off as the command's: either every byte arrived (exit 0) or it exits 125 and says so.
TEST_F(CliWithDaemon, OutputItCouldNotRelayWholeIsNeverPassedOffAsWhole) {
  const std::string capsule_bin = (fs::path(CAPSULE_BIN_DIR) / "capsule").string();
  const std::string pipeline = capsule_bin + " --socket " + socket_.string() +
                               " run -- sh -c 'head -c 268435456 /dev/zero'"
                               " 2>" + (dir_ / "flood.err").string() + "; echo $? >" + (dir_ / "flood.code").string();
  const pid_t pid = spawn({"/bin/sh", "-c", "(" + pipeline + ") | (sleep 2; wc -c > " + (dir_ / "flood.count").string() + ")"},
                          dir_ / "out", dir_ / "err");
  ASSERT_EQ(wait_exit(pid, std::chrono::seconds(300)), 0);
  const std::string code = slurp(dir_ / "flood.code");
  const std::string err = slurp(dir_ / "flood.err");
  if (code == "0\n") {
    EXPECT_EQ(slurp(dir_ / "flood.count"), "268435456\n") << err;
  } else {
    EXPECT_EQ(code, "125\n") << err;
    EXPECT_NE(err.find("were not relayed"), std::string::npos) << err;
    EXPECT_NE(slurp(dir_ / "flood.count"), "268435456\n") << err;
  }
}

TEST_F(CliWithDaemon, TimeoutExits124) {
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = capsule({"run", "--timeout", "1s", "--", "sleep", "30"});
  EXPECT_EQ(o.code, 124) << o.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(o.err.find("timed_out"), std::string::npos) << o.err;
}

TEST_F(CliWithDaemon, JsonPrintsTheRunObjectAndLsAndLogsFindIt) {
  const std::string label = unique_label();
  const Outcome o = capsule({"run", "--json", "--label", label, "--", "sh", "-c", "echo to-out; echo to-err >&2"});
  ASSERT_EQ(o.code, 0) << o.err;
  const json run = json::parse(o.out);
  EXPECT_EQ(run["state"], "succeeded");
  EXPECT_EQ(run["result"]["exit_code"], 0);
  const std::string id = run["id"];

  const Outcome ls = capsule({"runs", "ls", "--label", label});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(ls.out.rfind("ID ", 0), 0u) << ls.out;
  EXPECT_NE(ls.out.find(id), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("succeeded"), std::string::npos) << ls.out;

  const Outcome ls_json = capsule({"runs", "ls", "--json", "--label", label});
  ASSERT_EQ(ls_json.code, 0) << ls_json.err;
  const json page = json::parse(ls_json.out);
  ASSERT_EQ(page["runs"].size(), 1u);
  EXPECT_EQ(page["runs"][0]["id"], id);

  const Outcome out = capsule({"runs", "logs", id});
  EXPECT_EQ(out.code, 0) << out.err;
  EXPECT_EQ(out.out, "to-out\n");
  EXPECT_EQ(capsule({"runs", "logs", id, "--stderr"}).out, "to-err\n");

  const Outcome show = capsule({"runs", "show", id});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(json::parse(show.out)["id"], id);

  const Outcome cancel = capsule({"runs", "cancel", id});
  EXPECT_EQ(cancel.code, 1);
  EXPECT_NE(cancel.err.find("capsule: "), std::string::npos) << cancel.err;
}

TEST_F(CliWithDaemon, BadFlagValuesExitNonZeroWithAMessage) {
  const Outcome memory = capsule({"run", "--memory", "4x", "--", "true"});
  EXPECT_EQ(memory.code, 125);
  EXPECT_NE(memory.err.find("limits.memory"), std::string::npos) << memory.err;
  const Outcome cpus = capsule({"run", "--cpus", "lots", "--", "true"});
  EXPECT_EQ(cpus.code, 125);
  EXPECT_NE(cpus.err.find("--cpus"), std::string::npos) << cpus.err;
  const Outcome unknown = capsule({"runs", "show", "no-such-run"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("capsule: "), std::string::npos) << unknown.err;
}

TEST_F(CliWithDaemon, DetachAndCancel) {
  const Outcome submitted = capsule({"run", "-d", "--", "sleep", "30"});
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  ASSERT_FALSE(id.empty());
  const Outcome cancel = capsule({"runs", "cancel", id});
  EXPECT_EQ(cancel.code, 0) << cancel.err;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string state;
  while ((state = api("GET", "/v1/runs/" + id)["state"]) == "queued" || state == "running") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "still " << state;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(state, "cancelled");
}

TEST_F(CliWithDaemon, CtrlCCancelsTheStreamedRun) {
  const std::string label = unique_label();
  const pid_t pid = spawn({(fs::path(CAPSULE_BIN_DIR) / "capsule").string(), "--socket", socket_.string(), "run",
                           "--label", label, "--", "sleep", "30"},
                          dir_ / "int.out", dir_ / "int.err");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (api("GET", "/v1/runs?state=running&label=" + http::url_encode(label))["runs"].empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << slurp(dir_ / "int.err");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid, std::chrono::seconds(30)), 137);
  const std::string err = slurp(dir_ / "int.err");
  EXPECT_NE(err.find("cancelling run"), std::string::npos) << err;
  EXPECT_NE(err.find("cancelled"), std::string::npos) << err;
}

// The first SIGINT asks for the cancel; the command ignores the TERM of it, so the run goes on through its kill
// grace, and the second SIGINT stops the waiting at once (130), naming the run, which the daemon still ends.
TEST_F(CliWithDaemon, ASecondCtrlCStopsWaitingForARunThatIsStillEnding) {
  const std::string label = unique_label();
  const pid_t pid = spawn({(fs::path(CAPSULE_BIN_DIR) / "capsule").string(), "--socket", socket_.string(), "run",
                           "--label", label, "--kill-grace", "5s", "--", "sh", "-c",
                           "trap '' TERM; echo ready; sleep 30"},
                          dir_ / "twice.out", dir_ / "twice.err");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (slurp(dir_ / "twice.out").find("ready") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << slurp(dir_ / "twice.err");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGINT);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (slurp(dir_ / "twice.err").find("cancelling run") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << slurp(dir_ / "twice.err");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid, std::chrono::seconds(10)), kExitStoppedWaiting);
  const std::string err = slurp(dir_ / "twice.err");
  const json runs = api("GET", "/v1/runs?label=" + http::url_encode(label))["runs"];
  ASSERT_EQ(runs.size(), 1u) << runs.dump();
  const std::string id = runs[0]["id"];
  EXPECT_NE(err.find("not waiting for run " + id + " any longer"), std::string::npos) << err;
  std::string state;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((state = api("GET", "/v1/runs/" + id)["state"]) == "queued" || state == "running") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "still " << state;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(state, "cancelled");
}

TEST_F(CliWithDaemon, VersionShowsBoth) {
  const Outcome o = capsule({"version"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.rfind("capsule " + std::string(client_version()) + "\n", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("\ncapsuled "), std::string::npos) << o.out;
}

TEST_F(CliWithDaemon, RunStartsADaemonWhenNoneListens) {
  const fs::path socket = dir_ / "auto.sock";
  const Outcome o = [&] {
    const pid_t pid = spawn({(fs::path(CAPSULE_BIN_DIR) / "capsule").string(), "--socket", socket.string(), "run",
                             "--", "echo", "auto"},
                            dir_ / "auto.out", dir_ / "auto.err", {"CAPSULE_STATE_DIR=" + (dir_ / "auto-state").string()});
    return Outcome{wait_exit(pid, std::chrono::seconds(60)), slurp(dir_ / "auto.out"), slurp(dir_ / "auto.err")};
  }();
  const auto at = o.err.find("capsule: started capsuled (pid ");
  ASSERT_NE(at, std::string::npos) << o.err;
  const pid_t started = std::stoi(o.err.substr(at + std::strlen("capsule: started capsuled (pid ")));
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "auto\n");
  EXPECT_TRUE(fs::exists(dir_ / "auto-state" / "capsuled.log"));
  ASSERT_GT(started, 1);
  ::kill(started, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (alive(started) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// capsule-launch with `capsule run`'s letters (-W workspace, -w workdir, -e, -m) and its exit rule: the
// command's status, 127 for a command that is not there, 124 for a timeout, 125 for a malformed flag value.
TEST(CapsuleLaunch, SameFlagLettersAndExitRuleAsCapsuleRun) {
  const fs::path launch = fs::path(CAPSULE_BIN_DIR) / "capsule-launch";
  if (std::string(CAPSULE_BIN_DIR).empty() || !fs::exists(launch)) GTEST_SKIP() << "capsule-launch is not built";
  if (::geteuid() != 0) GTEST_SKIP() << "capsule-launch needs root";
  char pattern[] = "/tmp/capsule-launch-XXXXXX";
  const fs::path dir = ::mkdtemp(pattern);
  const std::shared_ptr<void> remove_dir(nullptr, [&](void*) { fs::remove_all(dir); });
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_directories(dir / "ws" / "sub");
  std::ofstream(dir / "ws" / "marker") << "marker\n";
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {launch.string(), "--state-dir", (dir / "state").string()});
    return run_to_end(args, dir, std::chrono::seconds(120));
  };

  const Outcome exited = run({"-W", (dir / "ws").string(), "-w", "/workspace/sub", "-e", "A=from-flag", "-m", "256m",
                              "--", "sh", "-c", "pwd; cat ../marker; echo $A; exit 3"});
  EXPECT_EQ(exited.code, 3) << exited.err;
  const json result = json::parse(exited.out, nullptr, false);
  EXPECT_EQ(result.value("status", ""), "failed") << exited.out;
  EXPECT_EQ(result["stdout"].value("head", ""), "/workspace/sub\nmarker\nfrom-flag\n") << exited.out;

  const Outcome missing = run({"--", "/no/such/command"});
  EXPECT_EQ(missing.code, 127) << missing.out << missing.err;
  const Outcome timed_out = run({"--timeout", "1s", "--", "sleep", "30"});
  EXPECT_EQ(timed_out.code, 124) << timed_out.out << timed_out.err;
  const Outcome bad_size = run({"-m", "4x", "--", "true"});
  EXPECT_EQ(bad_size.code, 125);
  EXPECT_NE(bad_size.err.find("capsule-launch: "), std::string::npos) << bad_size.err;
  const Outcome bad_flag = run({"--no-such-flag", "--", "true"});
  EXPECT_EQ(bad_flag.code, 125) << bad_flag.err;
}

// ---------------------------------------------------------------------------------------------------------
// capsule and capsule-full (client/full_commands.h): the commands that need large libraries run in capsule-full.

// The shared libraries `binary` names in its dynamic section (readelf, from binutils, which gcc depends on).
std::vector<std::string> needed_libraries(const fs::path& binary, const fs::path& scratch) {
  const pid_t pid = spawn({"/usr/bin/readelf", "-d", binary.string()}, scratch / "readelf.out", scratch / "readelf.err");
  EXPECT_EQ(wait_exit(pid, std::chrono::seconds(60)), 0) << slurp(scratch / "readelf.err");
  std::vector<std::string> needed;
  std::istringstream lines(slurp(scratch / "readelf.out"));
  for (std::string line; std::getline(lines, line);) {
    const auto open = line.find("Shared library: [");
    if (open == std::string::npos) continue;
    const auto start = open + std::strlen("Shared library: [");
    needed.push_back(line.substr(start, line.find(']', start) - start));
  }
  return needed;
}

class CapsuleFull : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(CAPSULE_BIN_DIR).empty() || !fs::exists(fs::path(CAPSULE_BIN_DIR) / "capsule")) {
      GTEST_SKIP() << "capsule is not built";
    }
    char pattern[] = "/tmp/capsule-full-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  Outcome run(const fs::path& capsule, std::vector<std::string> args) {
    args.insert(args.begin(), capsule.string());
    return run_to_end(args, dir_, std::chrono::seconds(60));
  }
  fs::path dir_;
};

TEST_F(CapsuleFull, CapsuleLoadsNoneOfTheirLibrariesAndCapsuleFullDoes) {
  const fs::path bin = CAPSULE_BIN_DIR;
  const auto full = needed_libraries((bin / install_layout::kFullCliFromCli).lexically_normal(), dir_);
  const auto lean = needed_libraries(bin / "capsule", dir_);
  ASSERT_FALSE(lean.empty());
  for (const char* large : {"libarchive", "libyaml-cpp", "libssl", "libcrypto", "libsqlite3", "libpugixml", "libspdlog",
                            "libfmt"}) {
    for (const auto& library : lean) EXPECT_FALSE(library.starts_with(large)) << "capsule needs " << library;
    EXPECT_TRUE(std::any_of(full.begin(), full.end(), [&](const auto& library) { return library.starts_with(large); }))
        << "capsule-full does not need " << large << ": the list above checks nothing";
  }
}

TEST_F(CapsuleFull, CapsuleHandsThemOverWithTheSameArguments) {
  // batch ls reads only its --root (no daemon needed), given after the subcommand: it reaches capsule-full as typed.
  fs::create_directories(dir_ / "batches");
  const Outcome listed = run(fs::path(CAPSULE_BIN_DIR) / "capsule", {"batch", "ls", "--root", (dir_ / "batches").string(),
                                                                     "--json"});
  EXPECT_EQ(listed.code, 0) << listed.err;
  EXPECT_EQ(listed.out, "[]\n");
  const Outcome bad = run(fs::path(CAPSULE_BIN_DIR) / "capsule", {"stack", "up", (dir_ / "missing.yaml").string()});
  EXPECT_EQ(bad.code, 125) << "stack up's own exit status for a file it cannot read";
  EXPECT_NE(bad.err.find("missing.yaml: cannot be read"), std::string::npos) << bad.err;
}

TEST_F(CapsuleFull, WithoutCapsuleFullOnlyThoseCommandsFailAndSayWhy) {
  fs::create_directories(dir_ / "bin");
  fs::copy_file(fs::path(CAPSULE_BIN_DIR) / "capsule", dir_ / "bin" / "capsule");
  const Outcome help = run(dir_ / "bin" / "capsule", {"run", "--help"});
  EXPECT_EQ(help.code, 0) << help.err;
  const Outcome batch = run(dir_ / "bin" / "capsule", {"batch", "ls", "--root", dir_.string()});
  EXPECT_EQ(batch.code, 1);
  EXPECT_EQ(batch.err, "capsule: cannot run " + (dir_ / "bin" / install_layout::kFullCliFromCli).lexically_normal().string() +
                           " (which runs this command): No such file or directory\n");
}

}  // namespace
}  // namespace capsule::client

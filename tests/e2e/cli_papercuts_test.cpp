// The capsule CLI's papercuts that harnesses tripped on, against a real capsuled: --socket without a daemon never
// uses another daemon's state, --kill-grace, `runs logs --tail` (and ?tail=N), --help footers, one-row commands in
// `runs ls`, and `images import --labels-file`.
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <future>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

// What is at `path`: nothing, or its type, size and modification time (a log written to changes them).
std::string footprint(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "absent";
  return std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

constexpr const char* kExitStatusText = "Exit status of `capsule run`";

TEST(CliPapercuts, HelpShowsTheRunExitStatusOnlyWhereItApplies) {
  char pattern[] = "/tmp/capsule-help-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  for (const std::vector<std::string>& args : {std::vector<std::string>{"run", "--help"}, {"session", "exec", "--help"},
                                              {"session", "attach", "--help"}}) {
    const Cli o = run_capsule_cli(dir, args);
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find(kExitStatusText), std::string::npos) << args[0] << " " << args[1] << ":\n" << o.out;
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"runs", "ls", "--help"}, {"runs", "logs", "--help"}, {"images", "import", "--help"},
        {"session", "ls", "--help"}, {"session", "create", "--help"}, {"version", "--help"}, {"daemon", "--help"},
        {"proxy", "serve", "--help"}, {"--help"}}) {
    const Cli o = run_capsule_cli(dir, args);
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(o.out.find(kExitStatusText), std::string::npos) << args[0] << ":\n" << o.out;
  }
  EXPECT_NE(run_capsule_cli(dir, {"--help"}).out.find("`capsule run --help` tells"), std::string::npos);
  fs::remove_all(dir);
}

// With --socket naming a socket nobody listens on and no $CAPSULE_STATE_DIR, the state dir of a daemon for it is
// not known: `run` refuses (125) and `daemon` without --state-dir too, starting nothing and leaving the default
// state dir (root's /var/lib/capsule, or under $HOME / $XDG_STATE_HOME) as it was.
TEST(CliPapercuts, ASocketWithoutDaemonNeverUsesTheDefaultStateDir) {
  char pattern[] = "/tmp/capsule-socket-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path dir = pattern;
  const fs::path socket = dir / "run" / "capsuled.sock";
  const std::vector<std::string> env = {"CAPSULE_STATE_DIR=", "HOME=" + (dir / "home").string(),
                                        "XDG_STATE_HOME=" + (dir / "xdg").string()};
  const fs::path system_state = "/var/lib/capsule";
  const std::string before = footprint(system_state) + " | " + footprint(system_state / "capsuled.log");

  Cli o = run_capsule_cli(dir, {"--socket", socket.string(), "run", "--", "echo", "hi"}, env);
  EXPECT_EQ(o.code, 125) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_NE(o.err.find("no daemon answers at " + socket.string()), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("daemon --state-dir DIR"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("started capsuled"), std::string::npos) << o.err;
  // The same however the socket is given (`capsule run` parses apart from the other commands: cli_main.cpp).
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--socket=" + socket.string(), "run", "--", "true"},
                                              {"run", "--socket", socket.string(), "--", "true"}}) {
    const Cli again = run_capsule_cli(dir, args, env);
    EXPECT_EQ(again.code, 125) << again.err;
    EXPECT_NE(again.err.find("no daemon answers at " + socket.string()), std::string::npos) << again.err;
  }

  o = run_capsule_cli(dir, {"--socket", socket.string(), "session", "create"}, env);
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("is not known"), std::string::npos) << o.err;

  o = run_capsule_cli(dir, {"--socket", socket.string(), "daemon"}, env);
  EXPECT_EQ(o.code, 1) << o.err;
  EXPECT_NE(o.err.find("the state directory of a capsuled on " + socket.string() + " is not known"),
            std::string::npos) << o.err;

  EXPECT_EQ(footprint(system_state) + " | " + footprint(system_state / "capsuled.log"), before);
  EXPECT_FALSE(fs::exists(dir / "home"));
  EXPECT_FALSE(fs::exists(dir / "xdg"));
  EXPECT_FALSE(fs::exists(dir / "run"));  // not even the socket's directory
  fs::remove_all(dir);
}

class CapsuledCliPapercuts : public Capsuled {
 protected:
  Cli capsule(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args);
  }
  std::string logs(const std::string& id, const std::string& query) {
    const HttpResponse response = call("GET", "/v1/runs/" + id + "/logs?" + query);
    EXPECT_EQ(response.status, 200) << query << ": " << response.body;
    return response.body;
  }
};

TEST_F(CapsuledCliPapercuts, LogsTailIsTheLastLinesCutByTheDaemon) {
  start();
  // 2 million lines (about 15 MB): many times the tail's window, so the cut happens while reading.
  const json run = run_and_wait(sh("seq 1 2000000; printf 'no newline'; echo e1 >&2; echo e2 >&2"));
  ASSERT_EQ(run.value("state", ""), "succeeded") << run.dump();
  const std::string id = run["id"];
  EXPECT_EQ(logs(id, "tail=3"), "1999999\n2000000\nno newline");
  EXPECT_EQ(logs(id, "tail=1"), "no newline");
  EXPECT_EQ(logs(id, "stream=stderr&tail=1"), "e2\n");
  EXPECT_EQ(logs(id, "stream=stderr&tail=10000"), "e1\ne2\n");
  const std::string tail = logs(id, "tail=10000");
  EXPECT_EQ(std::count(tail.begin(), tail.end(), '\n'), 9999);
  EXPECT_EQ(tail.rfind("1990002\n1990003\n", 0), 0u) << tail.substr(0, 40);

  for (const char* bad : {"0", "10001", "-1", "ten", "", "3x"}) {
    expect_error(call("GET", "/v1/runs/" + id + "/logs?tail=" + std::string(bad)), 400, "invalid_query", "tail");
  }
  expect_error(call("GET", "/v1/runs/" + id + "/logs?tail=2&from=5"), 400, "invalid_query", "tail and from");

  Cli o = capsule({"runs", "logs", id, "--tail", "2"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "2000000\nno newline");
  o = capsule({"runs", "logs", "--stderr", "-n", "1", id});
  EXPECT_EQ(o.out, "e2\n");
  o = capsule({"runs", "logs", id, "--tail", "0"});
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("tail: expected a number of lines from 1 to 10000"), std::string::npos) << o.err;
}

TEST_F(CapsuledCliPapercuts, LogsTailIsBoundedInBytes) {
  start();
  // One 3 MB line: its last MiB.
  const json run = run_and_wait(sh("head -c 3000000 /dev/zero | tr '\\0' x; echo"));
  const std::string tail = logs(run["id"], "tail=1");
  EXPECT_EQ(tail.size(), 1u << 20);
  EXPECT_EQ(tail, std::string((1u << 20) - 1, 'x') + "\n");
}

TEST_F(CapsuledCliPapercuts, LogsTailThenFollowsTheRun) {
  start();
  const fs::path workspace = make_dir("ws");
  const std::string id = submit({{"argv", {"sh", "-c", "seq 1 5; while [ ! -e /workspace/go ]; do sleep 0.05; done; "
                                                       "echo later"}},
                                 {"workspace", {{"path", workspace.string()}, {"mode", "ro"}}}});
  ASSERT_TRUE(eventually([&] { return logs(id, "") == "1\n2\n3\n4\n5\n"; })) << logs(id, "");
  std::string received;
  const HttpResponse response = client().stream(
      "GET", "/v1/runs/" + id + "/logs?tail=2&follow=true", nullptr, {}, [&](std::string_view data) {
        if (received.empty()) write_file(workspace / "go", "");  // the tail came first; now the run goes on
        received += data;
      });
  EXPECT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(received, "4\n5\nlater\n");
  EXPECT_EQ(wait_finished(id).value("state", ""), "succeeded");
}

TEST_F(CapsuledCliPapercuts, KillGraceReachesTheRunAndTheExec) {
  start();
  Cli o = capsule({"run", "--json", "--kill-grace", "2s", "--", "true"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(json::parse(o.out)["spec"]["limits"]["kill_grace"], 2000) << o.out;
  o = capsule({"run", "--kill-grace", "soon", "--", "true"});
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("kill_grace"), std::string::npos) << o.err;

  o = capsule({"session", "create", "-q", "--kill-grace", "4s"});
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string session = o.out.substr(0, o.out.find('\n'));
  EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + session))["spec"]["limits"]["kill_grace"], 4000);
  o = capsule({"session", "exec", session, "--json", "--kill-grace", "3s", "--", "true"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(json::parse(o.out)["spec"]["kill_grace"], 3000) << o.out;
  EXPECT_EQ(capsule({"session", "rm", session}).code, 0);
}

TEST_F(CapsuledCliPapercuts, RunsLsPutsAMultiLineCommandOnOneRow) {
  start();
  const std::string label = "papercut=multiline";
  run_and_wait({{"argv", {"sh", "-c", "echo one\n\techo two\r\necho three"}}, {"labels", {{"papercut", "multiline"}}}});
  const Cli o = capsule({"runs", "ls", "--label", label});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 2) << o.out;  // the header and the run
  EXPECT_NE(o.out.find("sh -c 'echo one\\n\\techo two\\r\\necho three'"), std::string::npos) << o.out;
}

TEST_F(CapsuledCliPapercuts, ImagesImportTakesALabelsFileUnderExplicitLabels) {
  start();
  const fs::path root = make_dir("rootfs");
  write_file(root / "marker", "m\n");
  write_file(dir_ / "labels.json",
             R"({"org.capsule.toolchain.python": "3.12.1", "org.example.recipe": "python3.sh", "kind": "file"})");
  Cli o = capsule({"images", "import", "-q", root.string(), "test/labelled:1", "--labels-file",
                   (dir_ / "labels.json").string(), "--label", "kind=explicit"});
  ASSERT_EQ(o.code, 0) << o.err;
  const json image = body_json(call("GET", "/v1/images/" + http::url_encode("test/labelled:1")));
  EXPECT_EQ(image["config"]["labels"], json({{"org.capsule.toolchain.python", "3.12.1"},
                                             {"org.example.recipe", "python3.sh"},
                                             {"kind", "explicit"}}))
      << image.dump();

  write_file(dir_ / "bad.json", R"({"org.capsule.toolchain.python": 3.12})");
  o = capsule({"images", "import", root.string(), "test/bad:1", "--labels-file", (dir_ / "bad.json").string()});
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("label org.capsule.toolchain.python is not a string"), std::string::npos) << o.err;
  write_file(dir_ / "broken.json", "{\"a\": ");
  o = capsule({"images", "import", root.string(), "test/bad:1", "--labels-file", (dir_ / "broken.json").string()});
  EXPECT_EQ(o.code, 1);
  EXPECT_NE(o.err.find("not valid JSON"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace capsule::testing

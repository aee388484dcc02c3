// Integration tests of sessions against a real capsuled: files persist across execs, an exec's timeout ends its
// whole tree (a double-forked grandchild too) and keeps its partial output, idle timeouts, background execs
// re-attached from an offset, stdin, protected paths, TTL expiry, 32 sessions at once, restart marks them lost,
// the listing's pages.
#include <unistd.h>

#include <atomic>

#include "base/base64.h"
#include "daemon/record/run_verdict.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledSessions : public Capsuled {
 protected:
  // POST /v1/sessions expecting 201; the session object.
  json create(const json& spec) const {
    const HttpResponse response = call("POST", "/v1/sessions", spec);
    EXPECT_EQ(response.status, 201) << response.body;
    return body_json(response);
  }
  // POST .../exec expecting 200; the exec's run object.
  json exec(const std::string& session, const json& spec) const {
    const HttpResponse response = call("POST", "/v1/sessions/" + session + "/exec", spec);
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response);
  }
  json get_session(const std::string& id) const { return body_json(call("GET", "/v1/sessions/" + id)); }
  // The daemon still answers: a one-shot run succeeds.
  void expect_daemon_answers() const { EXPECT_EQ(run_and_wait(sh("true"))["state"], "succeeded"); }
};

std::string out(const json& run) { return run["result"]["stdout"].value("head", ""); }
std::string err(const json& run) { return run["result"]["stderr"].value("head", ""); }

TEST_F(CapsuledSessions, FilesPersistAcrossExecsAndEachExecIsARunOfItsSession) {
  start();
  const fs::path workspace = make_dir("ws");
  write_file(workspace / "given.txt", "from the host\n");
  const json session = create({{"workspace", {{"path", workspace.string()}}}, {"labels", {{"task", "t1"}}}});
  ASSERT_EQ(session["state"], "ready") << session;
  const std::string id = session["id"];
  const json first = exec(id, {{"script", "echo made > /workspace/made.txt; mkdir -p /tmp/d && echo t > /tmp/d/f"}});
  EXPECT_EQ(first["state"], "succeeded") << first;
  const json second = exec(id, {{"script", "cat /workspace/made.txt /workspace/given.txt /tmp/d/f; pwd"}});
  EXPECT_EQ(out(second), "made\nfrom the host\nt\n/workspace\n") << second;
  // A heredoc in a script is part of the program, never typed into a terminal.
  const json heredoc = exec(id, {{"script", "cat <<'EOF'\nline $HOME\nEOF\necho after"}});
  EXPECT_EQ(out(heredoc), "line $HOME\nafter\n") << heredoc;
  EXPECT_FALSE(fs::exists(workspace / "made.txt")) << "a cow workspace leaves the host dir alone";

  EXPECT_EQ(second["spec"]["session"], id);
  EXPECT_EQ(get_run(second["id"]), second) << "an exec is a run: GET /v1/runs/{id} holds what the exec answered";
  // The answer is made from the row the daemon wrote: the same, bytes that are not UTF-8 and labels included.
  const json odd = exec(id, {{"script", "printf 'caf\\351 \\377\\n'; exit 4"}, {"labels", {{"step", "odd"}}}});
  EXPECT_EQ(odd["state"], "failed") << odd;
  EXPECT_EQ(odd["labels"]["step"], "odd") << odd;
  EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + id + "/execs/" + odd["id"].get<std::string>())), odd);
  const json execs = body_json(call("GET", "/v1/sessions/" + id + "/execs"))["execs"];
  ASSERT_EQ(execs.size(), 4u) << execs;
  EXPECT_EQ(execs[0]["id"], odd["id"]) << "newest first";
  EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + id + "/execs/" + first["id"].get<std::string>()))["id"], first["id"]);
  const json shown = get_session(id);
  EXPECT_EQ(shown["execs"]["total"], 4);
  EXPECT_EQ(shown["execs"]["running"], 0);
  EXPECT_EQ(shown["labels"]["task"], "t1");

  expect_error(call("POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"ls"}}, {"tty", true}}), 400,
               "invalid_spec", "tty: unknown field");
  expect_error(call("POST", "/v1/sessions/nosuch/exec", json{{"argv", {"ls"}}}), 404, "not_found", "no session with id nosuch");
  const HttpResponse deleted = call("DELETE", "/v1/sessions/" + id);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(body_json(deleted)["state"], "deleted");
  expect_error(call("POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"ls"}}}), 409, "session_ended",
               "session " + id + " has ended");
  expect_error(call("DELETE", "/v1/sessions/" + id), 409, "session_ended", "has ended");
  EXPECT_EQ(get_session(id)["state"], "deleted") << "the record stays";
  expect_daemon_answers();
}

TEST_F(CapsuledSessions, PersistShellStateKeepsCwdAndExportsBetweenScriptExecs) {
  start();
  const std::string id = create({{"persist_shell_state", true}})["id"];
  EXPECT_EQ(exec(id, {{"script", "mkdir -p /tmp/w && cd /tmp/w && export FOO=\"it's \\\"quoted\\\"\" BAR=1"}})["state"], "succeeded");
  EXPECT_EQ(out(exec(id, {{"script", "pwd; echo \"$FOO\" $BAR"}})), "/tmp/w\nit's \"quoted\" 1\n");
  // The exec's own env and cwd win over the saved state; a failing script still saves it and keeps its status.
  const json failing = exec(id, {{"script", "echo $BAR; pwd; export BAZ=z; exit 3"}, {"env", {{"BAR", "given"}}}, {"cwd", "/"}});
  EXPECT_EQ(failing["state"], "failed");
  EXPECT_EQ(failing["result"]["exit_code"], 3);
  EXPECT_EQ(out(failing), "given\n/\n");
  EXPECT_EQ(out(exec(id, {{"script", "pwd; echo $BAZ $BAR"}})), "/\nz given\n");
  EXPECT_EQ(out(exec(id, {{"argv", {"pwd"}}})), "/\n") << "argv execs start where the session says";
}

TEST_F(CapsuledSessions, TimeoutEndsADoubleForkedGrandchildAndKeepsThePartialOutput) {
  start();
  const std::string id = create(json::object())["id"];
  const json timed_out =
      exec(id, {{"script", "echo partial; echo oops >&2; (sleep 300 &) ; sleep 300"}, {"timeout", 1000}, {"kill_grace", 200}});
  EXPECT_EQ(timed_out["state"], "timed_out") << timed_out;
  EXPECT_EQ(out(timed_out), "partial\n");
  EXPECT_EQ(err(timed_out), "oops\n");
  EXPECT_TRUE(eventually([&] { return sandbox_processes("sleep").empty(); }, 5s)) << "the grandchild survived";
  const json scan = exec(id, {{"script", "for p in /proc/[0-9]*; do cat $p/comm; done"}});
  EXPECT_EQ(scan["state"], "succeeded") << scan;
  EXPECT_EQ(out(scan).find("sleep"), std::string::npos) << "left in the session: " << out(scan);
  expect_daemon_answers();
}

TEST_F(CapsuledSessions, IdleTimeoutEndsAnExecThatStopsWriting) {
  start();
  const std::string id = create(json::object())["id"];
  const json idle = exec(id, {{"script", "echo started; sleep 300"}, {"idle_timeout", 500}, {"kill_grace", 200}});
  EXPECT_EQ(idle["state"], "idle_timed_out") << idle;
  EXPECT_EQ(out(idle), "started\n");
  EXPECT_EQ(exec(id, {{"argv", {"true"}}})["state"], "succeeded") << "the session goes on";
}

TEST_F(CapsuledSessions, BackgroundExecIsReattachedFromAnOffset) {
  start();
  const std::string id = create(json::object())["id"];
  const HttpResponse accepted = call("POST", "/v1/sessions/" + id + "/exec",
                                     json{{"script", "for i in 1 2 3 4; do echo line$i; sleep 0.3; done"}, {"background", true}});
  ASSERT_EQ(accepted.status, 202) << accepted.body;
  const std::string exec_id = body_json(accepted)["id"];
  // A first client reads part of it and goes away; the exec goes on.
  const HttpResponse stream = call("GET", "/v1/sessions/" + id + "/execs/" + exec_id + "/stream?from=6");
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.body, "line2\nline3\nline4\n") << "followed from byte 6 until the exec ended";
  EXPECT_EQ(wait_finished(exec_id)["state"], "succeeded");
  const HttpResponse again = call("GET", "/v1/sessions/" + id + "/execs/" + exec_id + "/stream?stream=stdout&from=12");
  EXPECT_EQ(again.body, "line3\nline4\n");
  expect_error(call("GET", "/v1/sessions/" + id + "/execs/" + exec_id + "/stream?from=x"), 400, "invalid_query",
               "from: expected a byte offset");
  expect_error(call("GET", "/v1/sessions/" + id + "/execs/nosuch/stream"), 404, "not_found", "has no exec nosuch");
}

TEST_F(CapsuledSessions, SignalReachesABackgroundExec) {
  start();
  const std::string id = create(json::object())["id"];
  const HttpResponse accepted =
      call("POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"sleep", "300"}}, {"background", true}});
  ASSERT_EQ(accepted.status, 202) << accepted.body;
  const std::string exec_id = body_json(accepted)["id"];
  wait_running(exec_id);
  const std::string signal_path = "/v1/sessions/" + id + "/execs/" + exec_id + "/signal";
  expect_error(call("POST", signal_path, json{{"signal", "BOOM"}}), 400, "invalid_spec", "unknown signal name");
  EXPECT_EQ(call("POST", signal_path, json{{"signal", "KILL"}}).status, 202);
  const json ended = wait_finished(exec_id);
  EXPECT_EQ(ended["state"], "signaled") << ended;
  expect_error(call("POST", signal_path, json{{"signal", "TERM"}}), 409, "already_finished", "is signaled");
}

TEST_F(CapsuledSessions, RunsCancelEndsAnExecAsCancelled) {
  start();
  const std::string id = create(json::object())["id"];
  const HttpResponse accepted =
      call("POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"sleep", "300"}}, {"background", true}, {"kill_grace", 100}});
  ASSERT_EQ(accepted.status, 202) << accepted.body;
  const std::string exec_id = body_json(accepted)["id"];
  wait_running(exec_id);
  EXPECT_EQ(call("POST", "/v1/runs/" + exec_id + "/cancel").status, 202);
  EXPECT_EQ(wait_finished(exec_id)["state"], "cancelled");
  expect_error(call("POST", "/v1/runs/" + exec_id + "/cancel"), 409, "already_finished", "is cancelled");
  EXPECT_EQ(exec(id, {{"argv", {"true"}}})["state"], "succeeded") << "the session goes on";
}

TEST_F(CapsuledSessions, DeleteCancelsRunningExecsAndLeavesNothing) {
  start();
  const std::string id = create(json::object())["id"];
  const HttpResponse accepted =
      call("POST", "/v1/sessions/" + id + "/exec", json{{"script", "(sleep 300 &); sleep 300"}, {"background", true}});
  ASSERT_EQ(accepted.status, 202) << accepted.body;
  const std::string exec_id = body_json(accepted)["id"];
  wait_running(exec_id);
  ASSERT_TRUE(eventually([&] { return sandbox_processes("sleep").size() == 2; }, 10s));
  EXPECT_EQ(body_json(call("DELETE", "/v1/sessions/" + id))["state"], "deleted");
  const json ended = wait_finished(exec_id);
  EXPECT_EQ(ended["state"], "cancelled") << ended;
  EXPECT_EQ(ended["result"]["reason"], "cancelled: the session ended (deleted: deleted by uid 0)");
  EXPECT_TRUE(sandbox_processes("sleep").empty());
  EXPECT_EQ(get_session(id)["execs"]["total"], 1);
  expect_daemon_answers();
}

TEST_F(CapsuledSessions, StdinIsGivenBytesOrAtEof) {
  start();
  const std::string id = create(json::object())["id"];
  EXPECT_EQ(out(exec(id, {{"argv", {"wc", "-c"}}, {"stdin_b64", base::base64_encode(std::string("a\0b\n", 4))}})), "4\n");
  EXPECT_EQ(out(exec(id, {{"argv", {"cat"}}, {"stdin", "typed\n"}})), "typed\n");
  const json closed = exec(id, {{"argv", {"cat"}}, {"timeout", 10000}});
  EXPECT_EQ(closed["state"], "succeeded") << "without stdin, cat sees EOF at once";
  EXPECT_EQ(out(closed), "");
}

TEST_F(CapsuledSessions, ProtectedFilesCannotBeChangedAnyWay) {
  start();
  const fs::path workspace = make_dir("ws");
  fs::create_directories(workspace / "tests");
  fs::create_directories(workspace / "src");
  write_file(workspace / "tests" / "test_a.py", "assert True\n");
  write_file(workspace / "src" / "a.py", "x = 1\n");
  const std::string id = create({{"workspace", {{"path", workspace.string()}}}, {"protect", {"tests/**"}}})["id"];
  struct Attempt {
    std::string script;
    std::string error;
  };
  const std::vector<Attempt> attempts = {
      {"echo changed > /workspace/tests/test_a.py", "Read-only file system"},
      {"rm /workspace/tests/test_a.py", "Read-only file system"},
      {"mv /workspace/tests /workspace/moved", "Device or resource busy"},
      {"rm -rf /workspace/tests", "Read-only file system"},
      {"ln /workspace/tests/test_a.py /workspace/hard", "Invalid cross-device link"},
      {"chmod 777 /workspace/tests/test_a.py", "Read-only file system"},
      {"touch /workspace/tests/new.py", "Read-only file system"},
  };
  for (const auto& attempt : attempts) {
    const json run = exec(id, {{"script", attempt.script}});
    EXPECT_EQ(run["state"], "failed") << attempt.script << ": " << run;
    EXPECT_NE(err(run).find(attempt.error), std::string::npos) << attempt.script << ": " << err(run);
  }
  const json check = exec(id, {{"script", "cat /workspace/tests/test_a.py; ls /workspace/tests; "
                                          "echo y=2 >> /workspace/src/a.py && cat /workspace/src/a.py"}});
  EXPECT_EQ(out(check), "assert True\ntest_a.py\nx = 1\ny=2\n") << check;
  EXPECT_EQ(slurp(workspace / "tests" / "test_a.py"), "assert True\n");
  expect_daemon_answers();
}

TEST_F(CapsuledSessions, TtlExpiryRemovesTheBoxAndIdleTtlCanFreeze) {
  start();
  const std::string expiring = create({{"ttl", 1000}})["id"];
  const std::string freezing = create({{"idle_ttl", 500}, {"on_expiry", "freeze"}})["id"];
  EXPECT_EQ(exec(freezing, {{"argv", {"true"}}})["state"], "succeeded");
  EXPECT_TRUE(eventually([&] { return get_session(expiring)["state"] == "expired"; }, 20s)) << get_session(expiring);
  EXPECT_NE(get_session(expiring)["ended_reason"].get<std::string>().find("ttl of 1000 ms passed"), std::string::npos);
  expect_error(call("POST", "/v1/sessions/" + expiring + "/exec", json{{"argv", {"true"}}}), 409, "session_ended", "has ended");
  EXPECT_TRUE(eventually([&] { return get_session(freezing)["state"] == "frozen"; }, 20s)) << get_session(freezing);
  expect_error(call("POST", "/v1/sessions/" + freezing + "/exec", json{{"argv", {"true"}}}), 409, "session_frozen",
               "is frozen (idle for idle_ttl 500 ms)");
  EXPECT_EQ(body_json(call("DELETE", "/v1/sessions/" + freezing))["state"], "deleted");
  const json listed = body_json(call("GET", "/v1/sessions?state=expired"))["sessions"];
  ASSERT_EQ(listed.size(), 1u) << listed;
  EXPECT_EQ(listed[0]["id"], expiring);
  expect_daemon_answers();
}

TEST_F(CapsuledSessions, ThirtyTwoSessionsAtOnceEachRunTheirOwnExecs) {
  start();
  constexpr int kSessions = 32;
  std::vector<std::string> problems(kSessions);
  std::vector<std::thread> threads;
  for (int i = 0; i < kSessions; ++i) {
    threads.emplace_back([&, i] {
      try {
        // Small disks: what 32 boxes' disks are promised is held against the host's free space (32 default
        // 10 GiB disks are more than a test machine has; CapsuledDisk.BoxDisksArePromisedNoMoreThanTheStateFilesystemHas).
        const HttpResponse made = call("POST", "/v1/sessions", json{{"env", {{"I", std::to_string(i)}}},
                                                                    {"limits", {{"disk", "256m"}, {"inodes", 16384}}}});
        if (made.status != 201) return void(problems[i] = "create: " + made.body);
        const std::string id = body_json(made)["id"];
        for (int round = 0; round < 2; ++round) {
          const HttpResponse ran = call("POST", "/v1/sessions/" + id + "/exec",
                                        json{{"script", "echo $I > /tmp/i; cat /tmp/i"}});
          const json run = json::parse(ran.body, nullptr, false);
          if (ran.status != 200 || run.is_discarded() || out(run) != std::to_string(i) + "\n") {
            return void(problems[i] = "exec: " + ran.body);
          }
        }
        if (call("DELETE", "/v1/sessions/" + id).status != 200) problems[i] = "delete failed";
      } catch (const std::exception& e) {
        problems[i] = e.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kSessions; ++i) EXPECT_EQ(problems[i], "") << "session " << i;
  EXPECT_EQ(body_json(call("GET", "/v1/sessions?state=deleted"))["sessions"].size(), kSessions);
}

TEST_F(CapsuledSessions, RestartMarksLiveSessionsLostAndKeepsTheirRecords) {
  start();
  const std::string id = create(json::object())["id"];
  const json done = exec(id, {{"argv", {"echo", "kept"}}});
  const HttpResponse accepted =
      call("POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"sleep", "300"}}, {"background", true}});
  ASSERT_EQ(accepted.status, 202);
  const std::string running = body_json(accepted)["id"];
  wait_running(running);
  kill9();
  restart();
  const json lost = get_session(id);
  EXPECT_EQ(lost["state"], "lost") << lost;
  EXPECT_NE(lost["ended_reason"].get<std::string>().find("restarted"), std::string::npos) << lost;
  EXPECT_EQ(get_run(done["id"])["state"], "succeeded");
  EXPECT_EQ(out(get_run(done["id"])), "kept\n");
  EXPECT_EQ(get_run(running)["state"], "interrupted");
  EXPECT_TRUE(sandbox_processes("sleep").empty());
  expect_error(call("POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"true"}}}), 409, "session_ended", "has ended");
  expect_daemon_answers();
}

// GET /v1/sessions in pages: `next` leads through every session once; a non-root caller gets full pages of its own
// sessions only, though others' lie between them.
TEST_F(CapsuledSessions, ListingComesInPagesAndACallerPagesThroughItsOwnOnly) {
  const std::string group = "capsule-sp-" + std::to_string(getpid());
  create_group(group);
  const TestUser user = create_user("capsule-sp-u-" + std::to_string(getpid()), group, {});
  const fs::path config = dir_ / "capsuled.json";
  write_file(config, json{{"socket_group", group}}.dump());
  start({"--config", config.string()});
  std::vector<std::string> roots, users;
  std::vector<UserCall> made_by_user;
  for (int i = 0; i < 3; ++i) {
    roots.push_back(create(json::object())["id"]);
    if (i < 2) made_by_user.push_back(call_as(user, socket_, "POST", "/v1/sessions", json::object()));
  }
  std::vector<UserCall> user_pages;
  for (const UserCall& made : made_by_user) {
    if (made.status == 201) users.push_back(made.json()["id"]);
  }
  std::string after;
  for (int i = 0; i < 3; ++i) {
    user_pages.push_back(call_as(user, socket_, "GET", "/v1/sessions?limit=1" + (after.empty() ? "" : "&after=" + after)));
    const json page = user_pages.back().json();
    if (!page.is_object() || !page["next"].is_string()) break;
    after = page["next"];
  }
  remove_user(user.name);
  remove_group(group);
  ASSERT_EQ(users.size(), 2u) << made_by_user[0].body << made_by_user[0].failure;

  // The user's pages: one session each, its own, newest first, and no `next` after the last.
  ASSERT_EQ(user_pages.size(), 2u) << user_pages.back().body;
  for (std::size_t i = 0; i < 2; ++i) {
    const json page = user_pages[i].json();
    ASSERT_EQ(page["sessions"].size(), 1u) << page;
    EXPECT_EQ(page["sessions"][0]["id"], users[1 - i]) << page;
  }
  EXPECT_EQ(user_pages[0].json()["next"], users[1]);
  EXPECT_TRUE(user_pages[1].json()["next"].is_null()) << user_pages[1].body;

  // Root: pages of 2 through all 5, each once, newest first.
  std::vector<std::string> seen;
  std::string cursor;
  for (int pages = 0; pages < 5; ++pages) {
    const HttpResponse listed = call("GET", "/v1/sessions?limit=2" + (cursor.empty() ? "" : "&after=" + cursor));
    ASSERT_EQ(listed.status, 200) << listed.body;
    const json page = body_json(listed);
    EXPECT_LE(page["sessions"].size(), 2u) << page;
    for (const json& session : page["sessions"]) seen.push_back(session["id"]);
    if (page["next"].is_null()) break;
    cursor = page["next"];
  }
  const std::vector<std::string> expected = {roots[2], users[1], roots[1], users[0], roots[0]};
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(body_json(call("GET", "/v1/sessions?limit=10"))["next"], nullptr);
  expect_error(call("GET", "/v1/sessions?limit=two"), 400, "invalid_query", "limit");
  expect_error(call("GET", "/v1/sessions?after=nosuch"), 400, "invalid_query", "after");
}

TEST_F(CapsuledSessions, ASessionExecThatCreatesAProtectedFileFailsItsVerdict) {
  start();
  const fs::path workspace = make_dir("ws");
  fs::create_directories(workspace / "tests");
  write_file(workspace / "tests" / "test_a.py", "def test_a(): pass\n");
  const std::string id =
      create({{"workspace", {{"path", workspace.string()}}}, {"protect", {"conftest.py", "tests/**"}}})["id"];
  const json clean = exec(id, {{"script", "echo 'x = 1' > /workspace/helper.py"}});
  EXPECT_EQ(clean["state"], "succeeded") << clean;
  EXPECT_EQ(clean["protect_violations"], json::array()) << clean;
  EXPECT_TRUE(daemon::run_passed(clean)) << clean;

  const json planted = exec(id, {{"script", "echo 'import pytest' > /workspace/conftest.py"}});
  EXPECT_EQ(planted["state"], "succeeded") << planted;
  EXPECT_EQ(planted["protect_violations"],
            json::parse(R"([{"path": "conftest.py", "reason": "protect: added, matches 'conftest.py'"}])"))
      << planted;
  EXPECT_FALSE(daemon::run_passed(planted));
  // The diff is the session's since its start: a later exec, say the test run, is judged in that workspace too.
  const json later = exec(id, {{"script", "true"}});
  EXPECT_EQ(later["protect_violations"].size(), 1u) << later;
  EXPECT_EQ(body_json(call("GET", "/v1/runs/" + later["id"].get<std::string>()))["protect_violations"],
            later["protect_violations"]);
  const std::string other = create({{"workspace", {{"path", workspace.string()}}}})["id"];
  EXPECT_FALSE(exec(other, {{"script", "touch /workspace/conftest.py"}}).contains("protect_violations"))
      << "no protect globs, nothing checked";
  expect_daemon_answers();
}

std::string junit_report_of(const std::vector<std::string>& cases) {
  std::string xml = "<testsuite name=\"s\" tests=\"" + std::to_string(cases.size()) + "\">";
  for (const std::string& name : cases) xml += "<testcase classname=\"t\" name=\"" + name + "\"/>";
  return xml + "</testsuite>";
}

TEST_F(CapsuledSessions, ASessionExecTakesABaselineAsARunDoes) {
  start();
  const fs::path workspace = make_dir("ws");
  fs::create_directories(workspace / "tests");
  write_file(workspace / "tests" / "test_a.py", "def test_a(): pass\n");
  json spec = sh("printf '%s' '" + junit_report_of({"one", "two"}) + "' > /workspace/junit.xml");
  spec["workspace"] = {{"path", workspace.string()}, {"mode", "cow"}};
  spec["collect"] = {{"junit", {"junit.xml"}}};
  const json baseline = run_and_wait(spec);
  ASSERT_EQ(baseline["tests"]["total"], 2) << baseline;
  const std::string baseline_id = baseline["id"];

  const std::string id = create({{"workspace", {{"path", workspace.string()}}}})["id"];
  const std::string write_one = "printf '%s' '" + junit_report_of({"one"}) + "' > /workspace/junit.xml";
  const json lost = exec(id, {{"script", write_one}, {"collect", {{"junit", {"junit.xml"}}}},
                              {"baseline", {{"run", baseline_id}}}});
  EXPECT_EQ(lost["state"], "succeeded") << lost;
  EXPECT_EQ(lost["baseline"]["verdict"], "regressed") << lost["baseline"];
  EXPECT_EQ(lost["baseline"]["run"], baseline_id);
  EXPECT_EQ(lost["baseline"]["removed"]["cases"], json::parse(R"([{"name": "t.two", "outcome": "passed"}])"))
      << lost["baseline"];
  EXPECT_FALSE(daemon::run_passed(lost));
  EXPECT_EQ(lost["spec"]["baseline"], json({{"run", baseline_id}, {"allow_removed", false}})) << lost["spec"];

  const json allowed = exec(id, {{"script", "true"}, {"collect", {{"junit", {"junit.xml"}}}},
                                 {"baseline", {{"run", baseline_id}, {"allow_removed", true}}}});
  EXPECT_EQ(allowed["baseline"]["verdict"], "passed") << allowed["baseline"];
  EXPECT_EQ(allowed["baseline"]["allowed"], json({"tests_removed"})) << allowed["baseline"];

  expect_error(call("POST", "/v1/sessions/" + id + "/exec",
                    json{{"script", "true"}, {"collect", {{"junit", {"junit.xml"}}}}, {"baseline", {{"run", "nosuch"}}}}),
               404, "baseline_not_found", "baseline.run: no run with id nosuch");
  expect_error(call("POST", "/v1/sessions/" + id + "/exec", json{{"script", "true"}, {"baseline", {{"run", baseline_id}}}}),
               400, "invalid_spec", "baseline: needs collect.junit");
}

}  // namespace
}  // namespace capsule::testing

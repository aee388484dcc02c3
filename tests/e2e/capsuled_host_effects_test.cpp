// What a box's content can do to the host through a real capsuled (issue 34): a non-root caller's cow session
// diff, and a /tmp filled past the memory limit, which must end the command oom_killed rather than capsule's
// internal_error.
#include <unistd.h>

#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

const std::string kHostEffectsGroup = account_name("capsule-t-he");

class CapsuledHostEffects : public Capsuled {
 protected:
  static void SetUpTestSuite() {
    try {
      create_group(kHostEffectsGroup);
      agent_ = create_user(account_name("capsule-t-he-ag"), kHostEffectsGroup, {});
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    remove_user(account_name("capsule-t-he-ag"));
    remove_group(kHostEffectsGroup);
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    Capsuled::SetUp();
    const fs::path config = dir_ / "capsuled.json";
    write_file(config, json{{"socket_group", kHostEffectsGroup}}.dump());
    start({"--config", config.string()});
  }

  // A workspace holding fill_tmp (sandbox/testcases): a writer to /tmp that holds less memory than init.
  fs::path fill_workspace() const {
    const fs::path workspace = make_dir("fill-ws");
    fs::copy_file(fs::path(testcases_dir()) / "fill_tmp", workspace / "fill_tmp");
    return workspace;
  }

  static inline TestUser agent_;
  static inline std::string setup_error_;
};

TEST_F(CapsuledHostEffects, ANonRootCallersCowSessionDiffListsItsChange) {
  const fs::path workspace = make_dir("agent-ws");
  write_file(workspace / "kept.txt", "kept\n");
  write_file(workspace / "gone.txt", "gone\n");
  for (const char* name : {"", "kept.txt", "gone.txt"}) {
    ASSERT_EQ(::chown((workspace / name).c_str(), agent_.uid, agent_.gid), 0);
  }
  const UserCall created = call_as(agent_, socket_, "POST", "/v1/sessions",
                                   json{{"workspace", {{"path", workspace.string()}, {"mode", "cow"}}}});
  ASSERT_EQ(created.status, 201) << created.body << created.failure;
  const std::string id = created.json()["id"];
  const UserCall changed = call_as(agent_, socket_, "POST", "/v1/sessions/" + id + "/exec",
                                   json{{"script", "cd /workspace && echo new > added.txt && rm gone.txt"}});
  ASSERT_EQ(changed.status, 200) << changed.body << changed.failure;
  ASSERT_EQ(changed.json()["state"], "succeeded") << changed.body;

  const UserCall diff = call_as(agent_, socket_, "GET", "/v1/sessions/" + id + "/diff?patch=1");
  ASSERT_EQ(diff.status, 200) << diff.body << diff.failure;
  const json found = diff.json();
  ASSERT_EQ(found["added"].size(), 1u) << diff.body;
  EXPECT_EQ(found["added"][0]["path"], "added.txt");
  ASSERT_EQ(found["deleted"].size(), 1u) << diff.body;
  EXPECT_EQ(found["deleted"][0]["path"], "gone.txt");
  EXPECT_EQ(found["totals"]["modified"], 0) << diff.body;
  EXPECT_FALSE(found.contains("errors")) << diff.body;
  EXPECT_FALSE(fs::exists(workspace / "added.txt")) << "the host tree is left alone";

  EXPECT_EQ(call_as(agent_, socket_, "DELETE", "/v1/sessions/" + id).status, 200);
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

// tmpfs pages are charged to the box's memory but belong to no process: once the limit is hit the kernel's victim
// must be the command, smaller than init as it is, and the run says oom_killed, not capsule's internal_error.
TEST_F(CapsuledHostEffects, ATmpfsFilledPastTheMemoryLimitEndsOomKilled) {
  json spec = sh("exec /workspace/fill_tmp");
  spec["workspace"] = {{"path", fill_workspace().string()}, {"mode", "ro"}};
  spec["limits"] = {{"memory", "64m"}, {"tmp_size", "1g"}, {"wall_time", "120s"}};
  const json run = run_and_wait(spec);
  EXPECT_EQ(run["state"], "oom_killed") << run.dump();
  EXPECT_GE(run["result"]["oom_kills"].get<int>(), 1) << run.dump();
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

// In a session the box outlives the fill: the exec ends oom_killed and the session stays ready. Its execs from
// the second on are handed to a standby forked ahead: that path gives up init's OOM score too.
TEST_F(CapsuledHostEffects, ASessionsTmpfsFilledPastTheMemoryLimitEndsTheExecOomKilled) {
  const HttpResponse created =
      call("POST", "/v1/sessions", json{{"workspace", {{"path", fill_workspace().string()}, {"mode", "ro"}}},
                                        {"limits", {{"memory", "64m"}, {"tmp_size", "1g"}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = body_json(created)["id"];
  const auto exec = [&](const std::string& script) {
    const HttpResponse answer = call("POST", "/v1/sessions/" + id + "/exec", json{{"script", script}});
    EXPECT_EQ(answer.status, 200) << answer.body;
    return body_json(answer);
  };
  EXPECT_EQ(exec("cat /proc/self/oom_score_adj")["result"]["stdout"].value("head", ""), "1000\n");
  EXPECT_EQ(exec("cat /proc/self/oom_score_adj")["result"]["stdout"].value("head", ""), "1000\n");
  const json filled = exec("exec /workspace/fill_tmp");
  EXPECT_EQ(filled["state"], "oom_killed") << filled.dump();
  const HttpResponse session = call("GET", "/v1/sessions/" + id);
  ASSERT_EQ(session.status, 200) << session.body;
  EXPECT_EQ(body_json(session)["state"], "ready") << session.body;
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200);
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

}  // namespace
}  // namespace capsule::testing

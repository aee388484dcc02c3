// SessionManager directly, for what the API does not reach yet: with_box (the file routes' access to a live
// box and its workspace overlay), recreate (reset: the box made again from the same environment), the cap, an
// exec's collect and the network switch of a session without a proxy.
#include "daemon/sessions/session_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "http/response.h"
#include "images/host_image.h"
#include "tests/support/test_support.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class SessionManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/capsule-test/session-manager-" + std::to_string(::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/ws");
    std::ofstream(dir_ + "/ws/given.txt") << "given\n";
    ledger_ = std::make_unique<Ledger>(":memory:");
    logs_ = std::make_unique<LogStore>(dir_ + "/logs");
    SessionManagerOptions options;
    options.max_sessions = 2;
    options.sessions_dir = dir_ + "/sessions";
    options.images_dir = dir_ + "/images";
    options.policies_dir = std::string(CAPSULE_SOURCE_DIR) + "/policies";
    images::prepare_host_image(options.images_dir);
    options.limits = spec::default_limit_policy();
    sessions_ = std::make_unique<SessionManager>(testing::shared_launcher(), *ledger_, *logs_, options);
  }
  void TearDown() override {
    sessions_.reset();
    fs::remove_all(dir_);
  }

  std::string create(bool with_workspace) {
    json body = json::object();
    if (with_workspace) body["workspace"] = dir_ + "/ws";
    const spec::SessionSpec spec = spec::parse_session_spec(body, spec::default_limit_policy());
    Submission submission;
    submission.spec = spec.environment;
    return sessions_->create(spec, submission, Peer{0, ::getpid()})["id"];
  }

  // Runs `script` (with `fields` of an ExecSpec) in the session and waits for its run object.
  json exec(const std::string& id, const std::string& script, json fields = json::object()) {
    auto done = std::make_shared<std::promise<json>>();
    fields["script"] = script;
    sessions_->exec(id, spec::parse_exec_spec(fields), Peer{0, ::getpid()}, [done](const json& event) {
      if (event.value("event", "") == "finished") done->set_value(event["run"]);
    });
    return done->get_future().get();
  }

  std::string dir_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<SessionManager> sessions_;
};

TEST_F(SessionManagerTest, WithBoxSeesTheWorkspaceOverlayAndRecreateStartsAfresh) {
  const std::string id = create(true);
  ASSERT_EQ(exec(id, "echo new > /workspace/new.txt; echo t > /tmp/t")["state"], "succeeded");
  std::string upper;
  sessions_->with_box(id, [&](const SessionBox& box) {
    upper = box.workspace_upper;
    EXPECT_EQ(box.workspace_layers, std::vector<std::string>{dir_ + "/ws"});
    EXPECT_TRUE(fs::exists(box.workspace_upper + "/new.txt")) << "changes land in the upper dir";
    EXPECT_TRUE(box.sandbox.open_root()) << "the box's root is reachable";
    EXPECT_GT(box.sandbox.host_id_base(), 0u);
  });
  ASSERT_FALSE(upper.empty());
  bool ran_while_down = false;
  sessions_->recreate(id, [&](const SessionBox& box) {
    ran_while_down = true;
    for (const auto& entry : fs::directory_iterator(box.workspace_upper)) fs::remove_all(entry.path());
  });
  EXPECT_TRUE(ran_while_down);
  const json after = exec(id, "cat /workspace/given.txt; ls /workspace; ls /tmp");
  EXPECT_EQ(after["state"], "succeeded") << after;
  EXPECT_EQ(after["result"]["stdout"]["head"], "given\ngiven.txt\n") << "back to the start, a fresh /tmp";
  EXPECT_EQ((*sessions_->get(id))["state"], "ready");
}

TEST_F(SessionManagerTest, TheCapOfLiveSessionsIs429AndADeletedOneFreesItsPlace) {
  const std::string first = create(false);
  create(false);
  try {
    create(false);
    ADD_FAILURE() << "a third session was made past the cap of 2";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(e.code(), "too_many_sessions");
    EXPECT_NE(std::string(e.what()).find("at most 2 sessions"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sessions_->remove(first, "test")["state"], "deleted");
  EXPECT_EQ(sessions_->live_count(), 1u);
  EXPECT_FALSE(create(false).empty());
  try {
    sessions_->with_box(first, [](const SessionBox&) {});
    ADD_FAILURE() << "with_box ran on an ended session";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(e.code(), "session_ended");
  }
}

// An exec's collect is read from the session's workspace as a run's is: the reports it wrote into the cow upper,
// the diff against the start; an exec without collect has neither, and each exec says its network.
TEST_F(SessionManagerTest, AnExecCollectsReportsFromTheSessionsWorkspace) {
  const std::string id = create(true);
  const std::string report =
      "<testsuite name='s' tests='2' failures='1'><testcase classname='c' name='ok'/>"
      "<testcase classname='c' name='bad'><failure message='no'/></testcase></testsuite>";
  const json collected = exec(id, "mkdir -p /workspace/out && echo \"" + report + "\" > /workspace/out/TEST-s.xml",
                              {{"collect", {{"junit", {"out/*.xml"}}}}});
  ASSERT_EQ(collected["state"], "succeeded") << collected;
  EXPECT_EQ(collected["tests"]["total"], 2) << collected["tests"];
  EXPECT_EQ(collected["tests"]["failed"], 1) << collected["tests"];
  EXPECT_EQ(collected["tests"]["files"], json({"out/TEST-s.xml"}));
  EXPECT_EQ(collected["diff"]["added"][0]["path"], "out/TEST-s.xml") << collected["diff"];
  EXPECT_EQ(collected["spec"]["network"], "none");
  const json plain = exec(id, "true");
  EXPECT_EQ(plain["tests"], nullptr) << plain;
  EXPECT_EQ(plain["diff"], nullptr) << plain;
  EXPECT_EQ(exec(id, "true", {{"collect", {{"junit", {"none/*.xml"}}}}})["tests"]["state"], "none_found");

  EXPECT_EQ((*sessions_->get(id))["network"], "none");
  EXPECT_EQ(sessions_->set_network(id, false)["network"], "none") << "already off: nothing to do";
  try {
    sessions_->set_network(id, true);
    ADD_FAILURE() << "a session made without the proxy switched it on";
  } catch (const http::ApiError& e) {
    EXPECT_EQ(e.code(), "invalid_request");
    EXPECT_NE(std::string(e.what()).find("created with network \"none\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace capsule::daemon

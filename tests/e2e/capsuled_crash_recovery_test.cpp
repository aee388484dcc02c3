// kill -9 of capsuled with live sessions and stacks, then a restart on the same state dir: what their boxes left
// (mounts, loop devices and their deleted disk images, network namespaces, cgroups) is found and removed.
#include <sys/mount.h>

#include <algorithm>

#include "sandbox/quota.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledCrashRecovery : public Capsuled {
 protected:
  void TearDown() override {
    if (daemon_ > 0) stop();
    // On a failure the leftovers are still attached: detached here (deepest first), or every failed run of this
    // test would keep loop devices and their images' space on the machine.
    std::vector<std::string> mounts = mounts_below(dir_);
    std::sort(mounts.begin(), mounts.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    for (const std::string& mount : mounts) ::umount2(mount.c_str(), MNT_DETACH);
    Capsuled::TearDown();
  }

  json create_session(const json& spec) const {
    const HttpResponse response = call("POST", "/v1/sessions", spec);
    EXPECT_EQ(response.status, 201) << response.body;
    return body_json(response);
  }
  json exec(const std::string& session, const json& spec) const {
    const HttpResponse response = call("POST", "/v1/sessions/" + session + "/exec", spec);
    EXPECT_EQ(response.status, 200) << response.body;
    return body_json(response);
  }

  // Mounts below the state dir other than the running daemon's own scratch tmpfs (and the boxes on it).
  std::vector<std::string> foreign_mounts() const {
    std::vector<std::string> found;
    for (const std::string& mount : mounts_below(state_)) {
      if (mount != (state_ / "scratch").string()) found.push_back(mount);
    }
    return found;
  }
  std::vector<std::string> netns_files() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (auto it = fs::directory_iterator(state_ / "netns", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    return names;
  }

  // A live box has its disk mounted and a loop device holding its (deleted) image: what a crash leaves.
  void expect_live_box_holds_a_disk() const {
    EXPECT_FALSE(foreign_mounts().empty()) << "the live box has no mounts below the state dir";
    EXPECT_FALSE(sandbox::loop_devices_below(state_.string()).empty()) << "the live box has no loop device";
  }

  // After the restart nothing of the dead daemon's boxes is attached, and once the daemon stops the state dir
  // holds no mount, no loop device and no cgroup, and can be removed.
  void expect_nothing_left_after_restart() {
    std::vector<std::string> mounts;
    EXPECT_TRUE(eventually([&] { return (mounts = foreign_mounts()).empty(); }))
        << "mounts left by the dead daemon: " << json(mounts).dump();
    std::vector<std::string> loops;
    EXPECT_TRUE(eventually([&] { return (loops = sandbox::loop_devices_below(state_.string())).empty(); }))
        << "loop devices left by the dead daemon: " << json(loops).dump();
    EXPECT_TRUE(netns_files().empty()) << json(netns_files()).dump();
    EXPECT_EQ(run_and_wait(sh("true"))["state"], "succeeded");  // the restarted daemon works
    stop();
    EXPECT_TRUE(mounts_below(state_).empty()) << json(mounts_below(state_)).dump();
    EXPECT_TRUE(eventually([&] { return (loops = sandbox::loop_devices_below(state_.string())).empty(); })) << json(loops).dump();
    for (const fs::path& dir : cgroup_parent_dirs(parent_)) EXPECT_FALSE(fs::exists(dir)) << dir;
    std::error_code removed;
    fs::remove_all(state_, removed);
    EXPECT_FALSE(removed) << "the state dir cannot be removed: " << removed.message();
  }
};

TEST_F(CapsuledCrashRecovery, AKilledDaemonsLiveSessionLeavesNothingAfterARestart) {
  start();
  const fs::path workspace = make_dir("ws");
  write_file(workspace / "given.txt", "given\n");
  const std::string id = create_session({{"workspace", {{"path", workspace.string()}}}})["id"];
  EXPECT_EQ(exec(id, {{"script", "echo changed > /workspace/given.txt; echo new > /var/new.txt"}})["state"], "succeeded");
  const HttpResponse background =
      call("POST", "/v1/sessions/" + id + "/exec", json{{"argv", {"sleep", "600"}}, {"background", true}});
  ASSERT_EQ(background.status, 202) << background.body;
  wait_running(body_json(background)["id"]);
  expect_live_box_holds_a_disk();

  kill9();
  restart();
  const json lost = body_json(call("GET", "/v1/sessions/" + id));
  EXPECT_EQ(lost["state"], "lost") << lost;
  EXPECT_TRUE(sandbox_processes("sleep").empty());
  EXPECT_FALSE(fs::exists(state_ / "sessions" / id)) << "the lost session's dir is left";
  EXPECT_EQ(slurp(workspace / "given.txt"), "given\n");  // the host's workspace never saw the box's changes
  expect_nothing_left_after_restart();
}

TEST_F(CapsuledCrashRecovery, AKilledDaemonsLiveStackLeavesNothingAfterARestart) {
  start();
  const fs::path workspace = make_dir("app");
  write_file(workspace / "app.txt", "app\n");
  const json service = {{"image", "host"},
                        {"workspace", {{"path", workspace.string()}}},
                        {"command", {"sh", "-c", "echo written > /workspace/out.txt; exec sleep 600"}}};
  const HttpResponse made = call("POST", "/v1/stacks?wait=true", json{{"services", {{"app", service}, {"db", service}}}});
  ASSERT_EQ(made.status, 201) << made.body;
  const json stack = body_json(made);
  ASSERT_EQ(stack["state"], "up") << stack.dump(1);
  ASSERT_EQ(netns_files().size(), 1u);
  expect_live_box_holds_a_disk();

  kill9();
  restart();
  const json lost = body_json(call("GET", "/v1/stacks/" + stack["id"].get<std::string>()));
  EXPECT_EQ(lost["state"], "lost") << lost.dump(1);
  for (const char* name : {"app", "db"}) {
    const std::string session = stack["services"][name]["session"];
    EXPECT_EQ(body_json(call("GET", "/v1/sessions/" + session))["state"], "lost");
    EXPECT_FALSE(fs::exists(state_ / "sessions" / session)) << "the lost service's session dir is left";
  }
  EXPECT_TRUE(sandbox_processes("sleep").empty());
  EXPECT_FALSE(fs::exists(state_ / "stacks" / stack["id"].get<std::string>()));
  expect_nothing_left_after_restart();
}

}  // namespace
}  // namespace capsule::testing

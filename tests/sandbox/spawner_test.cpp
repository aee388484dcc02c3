// The spawner (sandbox/spawner.h): boxes are cloned by capsule-init --spawner yet are the launcher's own children,
// and a helper that dies (killed from outside) is replaced without a failed run or a zombie left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sandbox/launcher.h"
#include "tests/support/test_support.h"

namespace capsule::sandbox {
namespace {

namespace fs = std::filesystem;

// Field 4 (ppid) and 3 (state) of /proc/<pid>/stat; the command name may hold spaces, so parse after ')'.
std::pair<pid_t, char> parent_and_state(pid_t pid) {
  const std::string text = testing::read_proc_file("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return {-1, '?'};
  std::istringstream rest(text.substr(close + 2));
  char state = '?';
  pid_t ppid = -1;
  rest >> state >> ppid;
  return {ppid, state};
}

// This process's children running `capsule-init --spawner` (zombies included: their cmdline is empty then).
std::vector<pid_t> spawner_helpers() {
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (parent_and_state(pid).first != getpid()) continue;
    const std::string args = testing::read_proc_file(entry.path() / "cmdline");
    if (args.find("--spawner") != std::string::npos) found.push_back(pid);
  }
  return found;
}

std::size_t zombie_children() {
  std::size_t zombies = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto [ppid, state] = parent_and_state(std::stoi(name));
    if (ppid == getpid() && state == 'Z') ++zombies;
  }
  return zombies;
}

TEST(Spawner, ABoxIsTheLaunchersChildThoughTheHelperClonedIt) {
  EnvironmentSpec environment = environment_of(testing::host_spec({"true"}));
  environment.session = true;
  std::unique_ptr<Sandbox> box = testing::shared_launcher().create(environment);
  EXPECT_EQ(parent_and_state(box->init_pid()).first, getpid()) << "CLONE_PARENT: the launcher reaps it by pidfd";
  EXPECT_FALSE(spawner_helpers().empty()) << "the clone came from capsule-init --spawner";
  box->destroy();
}

TEST(Spawner, AKilledHelperIsReplacedAndNothingIsLeftBehind) {
  LauncherOptions options;
  options.scratch_dir = "/tmp/capsule-test/spawner-" + std::to_string(getpid());
  options.cgroup.parent = "capsule-spawner-" + std::to_string(getpid());
  {
    const std::vector<pid_t> before = spawner_helpers();
    Launcher launcher(options);
    ASSERT_EQ(launcher.run(testing::host_spec({"true"})).status, Status::kSucceeded);
    const std::vector<pid_t> after_first = spawner_helpers();
    ASSERT_GT(after_first.size(), before.size());
    pid_t ours = -1;
    for (pid_t pid : after_first) {
      if (std::find(before.begin(), before.end(), pid) == before.end()) ours = pid;
    }
    ASSERT_GT(ours, 0);
    ASSERT_EQ(kill(ours, SIGKILL), 0);
    for (int i = 0; i < 200 && parent_and_state(ours).second != 'Z'; ++i) usleep(10000);
    for (int i = 0; i < 3; ++i) {
      const Result r = launcher.run(testing::host_spec({"/bin/sh", "-c", "echo again"}));
      ASSERT_EQ(r.status, Status::kSucceeded) << r.reason;
      EXPECT_EQ(r.stdout_capture.head, "again\n");
    }
    EXPECT_NE(parent_and_state(ours).second, 'Z') << "the dead helper was reaped when it was replaced";
    launcher.remove_cgroup_parent();
  }
  EXPECT_EQ(zombie_children(), 0u);
  std::error_code ec;
  fs::remove_all(options.scratch_dir, ec);
}

}  // namespace
}  // namespace capsule::sandbox

// Shared fixtures for sandbox tests: a process-wide Launcher and host-image specs.
// Scratch and image cache live under /tmp so tests never touch a real daemon's state.
#include "tests/support/test_support.h"

#include <fstream>
#include <sstream>

#include "images/host_image.h"

namespace capsule::testing {

sandbox::Launcher& shared_launcher() {
  static sandbox::Launcher launcher([] {
    sandbox::LauncherOptions options;
    options.scratch_dir = "/tmp/capsule-test/scratch";
    options.cgroup.parent = "capsule-test";
    return options;
  }());
  return launcher;
}

const std::string& default_seccomp_profile() {
  static const std::string profile = [] {
    std::ifstream file(std::string(CAPSULE_SOURCE_DIR) + "/policies/default.json");
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }();
  return profile;
}

sandbox::SandboxSpec host_spec(std::vector<std::string> argv) {
  static const images::HostImage image = images::prepare_host_image("/tmp/capsule-test/images");
  sandbox::SandboxSpec spec;
  spec.argv = std::move(argv);
  spec.env = image.env;
  spec.rootfs_layers = image.layers;
  spec.mounts = image.mounts;
  spec.mounts.push_back(sandbox::BindMount{CAPSULE_TESTCASES_DIR, "/opt/testcases", true, true});
  spec.seccomp_profile = default_seccomp_profile();
  spec.limits.wall_time = std::chrono::seconds(60);
  return spec;
}

std::string testcase(const std::string& name) { return "/opt/testcases/" + name; }

}  // namespace capsule::testing

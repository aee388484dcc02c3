// Shared fixtures for sandbox tests: a process-wide Launcher and host-image specs.
// Scratch and image cache live under /tmp so tests never touch a real daemon's state.
#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "base/file_util.h"
#include "base/unique_fd.h"
#include "images/host_image.h"

namespace capsule::testing {

std::string source_dir() { return CAPSULE_TREE_SOURCE_DIR; }
std::string bin_dir() { return CAPSULE_TREE_BIN_DIR; }
std::string testcases_dir() { return CAPSULE_TREE_TESTCASES_DIR; }

std::string shared_cgroup_parent() { return "capsule-test-" + std::to_string(::getpid()); }

namespace {

// The launcher with a scratch dir and cgroup parent of this process's own: test binaries run side by side (ctest
// -j), a test that checks what is left below its scratch dir must not see another process's sandboxes, and the
// parent can go at exit without racing another process's next box. Both removed at exit.
class SharedLauncher {
 public:
  SharedLauncher() : scratch_("/tmp/capsule-test/scratch-" + std::to_string(::getpid())) {
    sandbox::LauncherOptions options;
    options.scratch_dir = scratch_;
    options.cgroup.parent = shared_cgroup_parent();
    launcher_.emplace(options);
  }
  ~SharedLauncher() {
    launcher_->remove_cgroup_parent();
    launcher_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(scratch_, ignored);
  }
  sandbox::Launcher& get() { return *launcher_; }

 private:
  std::string scratch_;
  std::optional<sandbox::Launcher> launcher_;
};

}  // namespace

sandbox::Launcher& shared_launcher() {
  static SharedLauncher shared;
  return shared.get();
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

bool host_loopback_accepts(int port) {
  base::UniqueFd sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connect(sock.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
}

std::string read_proc_file(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  try {
    return base::read_fd(fd.get(), 1 << 20, "test", path);
  } catch (const std::exception&) {  // the process ended while it was read
    return {};
  }
}

std::size_t open_fds() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string describe(const sandbox::Result& result) {
  return std::string(sandbox::status_name(result.status)) + " reason=" + result.reason +
         " exit=" + std::to_string(result.exit_code) + " signal=" + std::to_string(result.signal) +
         "\nstdout: " + result.stdout_capture.head + "\nstderr: " + result.stderr_capture.head;
}

std::vector<pid_t> processes_running(const std::vector<std::string>& argv) {
  std::string wanted;
  for (const auto& arg : argv) wanted += arg + std::string(1, '\0');
  std::vector<pid_t> found;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (read_proc_file("/proc/" + name + "/cmdline") == wanted) found.push_back(std::stoi(name));
  }
  return found;
}

}  // namespace capsule::testing

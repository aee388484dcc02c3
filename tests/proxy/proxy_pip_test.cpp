// `capsule proxy serve` standalone, driven by real pip clients: the system pip (23.0, JSON) and every other
// CPython 3 interpreter on the machine (pyenv builds in root's home; old pips send text/html), skipped where
// absent. Host pip configuration (PIP_FIND_LINKS, /etc/pip.conf) is kept out with a clean environment.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/proxy/proxy_test_support.h"
#include "tests/support/test_support.h"

namespace capsule::proxy {
namespace {

namespace fs = std::filesystem;
using testing::FixtureUpstream;
using testing::TempDir;

// Runs `capsule proxy serve` on a free loopback port until destroyed.
class ProxyServeProcess {
 public:
  ProxyServeProcess(const std::vector<std::string>& flags) {
    std::vector<std::string> args{std::string(CAPSULE_BIN_DIR) + "/capsule", "proxy", "serve", "--listen",
                                  "127.0.0.1:0"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto [pid, line] = testing::spawn_reading_first_line(std::move(args));
    pid_ = pid;
    const std::string prefix = "listening on ";
    if (line.rfind(prefix, 0) != 0) throw std::runtime_error("capsule proxy serve did not start: " + line);
    url_ = line.substr(prefix.size());
  }
  ~ProxyServeProcess() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "capsule proxy serve did not stop cleanly";
  }
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

std::string run(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return "";
  std::string out;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? out : "FAILED (" + std::to_string(status) + "): " + out;
}

// `python -m pip download` of alpha and beta through the proxy as of `date`; the downloaded file names.
std::string download(const std::string& python, const std::string& index, const fs::path& dest) {
  return run("env -i PATH=/usr/bin:/bin HOME=" + dest.string() + " PIP_CONFIG_FILE=/dev/null " + python +
             " -m pip download -q --no-cache-dir --disable-pip-version-check -i " + index + " -d " + dest.string() +
             " alpha beta 2>&1 && ls " + dest.string());
}

std::vector<std::string> interpreters() {
  std::vector<std::string> found{"/usr/bin/python3"};
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/root/.pyenv/versions", ignored)) {
    const auto python = entry.path() / "bin/python3";
    if (fs::exists(python) && entry.path().filename().string().rfind("3.", 0) == 0) found.push_back(python);
  }
  return found;
}

TEST(ProxyServe, RealPipClientsResolveAsOfTheCutoff) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", false);
  ProxyServeProcess proxy({"--pypi-mirror", fixture.info().at("pypi_mirror").get<std::string>(), "--cache-dir",
                           (dir.path() / "cache").string()});
  const std::string early = proxy.url() + "/pypi/snapshot/2022-07-01/simple/";
  const std::string later = proxy.url() + "/pypi/snapshot/2023-01-01T00:00:00Z/simple/";
  int index = 0;
  for (const auto& python : interpreters()) {
    if (run(python + " -m pip --version >/dev/null 2>&1 && echo yes") != "yes\n") continue;  // no pip there
    SCOPED_TRACE(python);
    const auto a = dir.path() / ("a" + std::to_string(index));
    const auto b = dir.path() / ("b" + std::to_string(index++));
    EXPECT_EQ(download(python, early, a), "alpha-1.1-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\n");
    EXPECT_EQ(download(python, later, b), "alpha-1.1-py3-none-any.whl\nbeta-1.0-py3-none-any.whl\n");
  }
  EXPECT_GE(index, 1);
}

TEST(ProxyServe, RefusesBadFlagsWithAMessage) {
  const std::string capsule = std::string(CAPSULE_BIN_DIR) + "/capsule";
  EXPECT_NE(run(capsule + " proxy serve --listen 10.1.2.3:80 --pypi-mirror /nonexistent 2>&1").find("FAILED"),
            std::string::npos);
  const auto out = run(capsule + " proxy serve --listen 127.0.0.1:0 --pypi-mirror relative/dir 2>&1");
  EXPECT_NE(out.find("pypi_mirror: must be an absolute path"), std::string::npos) << out;
}

}  // namespace
}  // namespace capsule::proxy

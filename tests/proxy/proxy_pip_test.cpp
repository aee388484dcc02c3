// `capsule proxy serve` standalone, driven by real pip clients: the system pip (23.0, JSON) and every other
// CPython 3 interpreter on the machine (pyenv builds in root's home; old pips send text/html), skipped where
// absent. Host pip configuration (PIP_FIND_LINKS, /etc/pip.conf) is kept out with a clean environment.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
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

// --as-of-package: a package exempted to a later date serves the release the URL's cutoff hides (the fix a harness
// lets through, like uv's --exclude-newer-package), one held back serves an older one, the others keep the URL's
// date; dates as a spec's as_of_packages takes them (a span back from today too), PyPI names normalized, Maven by
// groupId:artifactId.
TEST(ProxyServe, APackageGivenItsOwnCutoffIsServedAsOfIt) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", false);
  const std::vector<std::string> mirrors{
      "--pypi-mirror", fixture.info().at("pypi_mirror").get<std::string>(),
      "--maven-mirror", fixture.info().at("maven_mirror").get<std::string>(),
      "--maven-publish-times", fixture.info().at("maven_publish_times").get<std::string>(),
      "--cache-dir", (dir.path() / "cache").string()};
  const auto serve = [&](std::vector<std::string> flags) {
    flags.insert(flags.begin(), mirrors.begin(), mirrors.end());
    return std::make_unique<ProxyServeProcess>(flags);
  };
  const auto versions = [](const std::string& url) {  // a maven-metadata.xml's <version>s
    const std::string xml = run("curl -sf " + url);
    std::string out;
    for (std::size_t at = xml.find("<version>"); at != std::string::npos; at = xml.find("<version>", at + 1)) {
      out += xml.substr(at + 9, xml.find('<', at + 9) - at - 9) + " ";
    }
    return out;
  };
  const std::string python = "/usr/bin/python3";
  ASSERT_EQ(run(python + " -m pip --version >/dev/null 2>&1 && echo yes"), "yes\n") << "the system pip is needed";
  const std::string early = "/pypi/snapshot/2022-07-01/simple/";
  {
    const auto plain = serve({});
    EXPECT_EQ(download(python, plain->url() + early, dir.path() / "plain"),
              "alpha-1.1-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\n");
  }
  {
    // beta 1.0 (2022-09-01) is hidden at 2022-07-01 but not at beta's own date; beta 1.1, newer still, is yanked.
    const auto exempted = serve({"--as-of-package", "beta=30 days", "--as-of-package", "org.capsule.fixture:lib=2022-09-01"});
    EXPECT_EQ(download(python, exempted->url() + early, dir.path() / "exempted"),
              "alpha-1.1-py3-none-any.whl\nbeta-1.0-py3-none-any.whl\n");
    const std::string maven = exempted->url() + "/maven/snapshot/2022-07-01/org/capsule/fixture/";
    EXPECT_EQ(versions(maven + "lib/maven-metadata.xml"), "1.0 1.1 ");
    EXPECT_EQ(versions(maven + "parent/maven-metadata.xml"), "1.0 ") << "a package without its own cutoff keeps the URL's";
    EXPECT_EQ(run("curl -sf -o /dev/null " + maven + "lib/1.1/lib-1.1.pom && echo served"), "served\n");
  }
  {
    const auto held_back = serve({"--as-of-package", "ALPHA=2022-03-01"});  // 1.1 came out 2022-06-01
    EXPECT_EQ(download(python, held_back->url() + early, dir.path() / "held"),
              "alpha-1.0-py3-none-any.whl\nbeta-0.9-py3-none-any.whl\n");
  }
}

TEST(ProxyServe, RefusesBadFlagsWithAMessage) {
  const std::string capsule = std::string(CAPSULE_BIN_DIR) + "/capsule";
  EXPECT_NE(run(capsule + " proxy serve --listen 10.1.2.3:80 --pypi-mirror /nonexistent 2>&1").find("FAILED"),
            std::string::npos);
  const auto out = run(capsule + " proxy serve --listen 127.0.0.1:0 --pypi-mirror relative/dir 2>&1");
  EXPECT_NE(out.find("pypi_mirror: must be an absolute path"), std::string::npos) << out;
  const auto serve = [&](const std::string& flags) { return run(capsule + " proxy serve --listen 127.0.0.1:0 " + flags + " 2>&1"); };
  std::string refused = serve("--as-of-package beta");
  EXPECT_NE(refused.find("--as-of-package: expected NAME=DATE"), std::string::npos) << refused;
  refused = serve("--as-of-package 'beta=last tuesday'");
  EXPECT_NE(refused.find("--as-of-package.pypi.beta: must be a date (YYYY-MM-DD)"), std::string::npos) << refused;
  refused = serve("--as-of-package beta=2022-01-01 --as-of-package Beta=2023-01-01");
  EXPECT_NE(refused.find("--as-of-package.pypi.beta: names a project already given"), std::string::npos) << refused;
  refused = serve("--as-of-package org.x:=2022-01-01");
  EXPECT_NE(refused.find("--as-of-package.maven.org.x:: must be \"groupId:artifactId\""), std::string::npos) << refused;
}

}  // namespace
}  // namespace capsule::proxy

// The Maven side of the proxy over a local tree as Debian's maven-repo is (no checksum files): computed .md5,
// .sha1, .sha256 and .sha512 sidecars, a real `mvn -B -C` through it without one checksum warning, and the
// publish-times file's rule (times recorded once) said at start and in a warning for each edit it ignores.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "store/digest.h"
#include "tests/proxy/proxy_test_support.h"

namespace capsule::proxy {
namespace {

namespace fs = std::filesystem;
using testing::FixtureUpstream;
using testing::ServedProxy;
using testing::TempDir;

constexpr const char* kLib = "/maven/snapshot/2022-12-31/org/capsule/fixture/lib/";

ProxyOptions mirror_options(const FixtureUpstream& fixture, const fs::path& maven_tree, const fs::path& cache) {
  ProxyOptions options;
  options.cache_dir = cache;
  options.pypi_mirror = fixture.info().at("pypi_mirror").get<std::string>();
  options.maven_mirror = {maven_tree};
  options.maven_publish_times = fixture.info().at("maven_publish_times").get<std::string>();
  options.workers = 4;
  return options;
}

// The fixture's Maven tree without any .md5 or .sha1 file, as Debian's /usr/share/maven-repo is.
fs::path copy_without_checksums(const fs::path& tree, const fs::path& to) {
  fs::copy(tree, to, fs::copy_options::recursive);
  std::vector<fs::path> sums;
  for (const auto& entry : fs::recursive_directory_iterator(to)) {
    if (entry.path().extension() == ".md5" || entry.path().extension() == ".sha1") sums.push_back(entry.path());
  }
  EXPECT_GT(sums.size(), 10u);
  for (const auto& file : sums) fs::remove(file);
  return to;
}

class BareMirror : public ::testing::Test {
 protected:
  TempDir dir;
  FixtureUpstream fixture{dir.path() / "fixture", false};
  fs::path tree = fixture.info().at("maven_mirror").get<std::string>();
  fs::path bare = copy_without_checksums(tree, dir.path() / "bare");
};

TEST_F(BareMirror, ArtifactChecksumsAreComputedFromTheFileWhenTheTreeHasNone) {
  ServedProxy served(mirror_options(fixture, bare, dir.path() / "cache"));
  for (const char* file : {"1.1/lib-1.1.jar", "1.1/lib-1.1.pom"}) {
    for (const char* sidecar : {".sha1", ".md5"}) {  // the fixture's original sidecars, written by Python's hashlib
      const auto answer = served.get(kLib + std::string(file) + sidecar);
      ASSERT_EQ(answer.status, 200u) << file << sidecar << ": " << answer.body;
      EXPECT_EQ(answer.body, testing::read_file(tree / "org/capsule/fixture/lib" / (file + std::string(sidecar))));
      EXPECT_EQ(answer.headers.at("Content-Type"), "text/plain");
    }
  }
  const std::string jar = testing::read_file(bare / "org/capsule/fixture/lib/1.1/lib-1.1.jar");
  EXPECT_EQ(served.get(kLib + std::string("1.1/lib-1.1.jar.sha256")).body, store::sha256_of(jar).hex());
  EXPECT_EQ(served.get(kLib + std::string("1.1/lib-1.1.jar.sha512")).body.size(), 128u);
  // Later versions stay hidden, sidecars included; a signature's checksum is never made up.
  EXPECT_EQ(served.get(kLib + std::string("1.2/lib-1.2.jar.sha1")).status, 404u);
  EXPECT_EQ(served.get(kLib + std::string("1.1/lib-1.1.jar.asc.sha1")).status, 404u);
  EXPECT_EQ(served.get(kLib + std::string("1.1/lib-1.1.war.sha1")).status, 404u);

  // Offline, from the cached file.
  ProxyOptions offline = mirror_options(fixture, bare, dir.path() / "cache");
  offline.offline = true;
  ServedProxy cached(offline);
  EXPECT_EQ(cached.get(kLib + std::string("1.1/lib-1.1.jar.sha1")).body,
            testing::read_file(tree / "org/capsule/fixture/lib/1.1/lib-1.1.jar.sha1"));
}

// What the machine's Maven makes of the tree: strict checksums (-C) pass, and no line speaks of checksums.
TEST_F(BareMirror, RealMavenWithStrictChecksumsBuildsThroughTheProxy) {
  if (std::system("command -v mvn >/dev/null 2>&1") != 0) GTEST_SKIP() << "no mvn on this machine";
  if (!fs::exists(bare / "org/capsule/fixture/fixture-maven-plugin/1.2/fixture-maven-plugin-1.2.jar")) {
    GTEST_SKIP() << "the fixture's Maven plugin was not built (no javac or plugin API)";
  }
  ServedProxy served(mirror_options(fixture, bare, dir.path() / "cache"));
  const fs::path project = dir.path() / "project";
  fs::create_directories(project);
  std::ofstream(project / "pom.xml")
      << "<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n  <modelVersion>4.0.0</modelVersion>\n"
         "  <parent><groupId>org.capsule.fixture</groupId><artifactId>parent</artifactId>"
         "<version>[1.0,2.0)</version><relativePath/></parent>\n"
         "  <artifactId>demo</artifactId><version>1</version><packaging>pom</packaging>\n</project>\n";
  std::ofstream(dir.path() / "settings.xml")
      << "<settings><mirrors><mirror><id>capsule</id><mirrorOf>*</mirrorOf><url>"
      << served.url("/maven/snapshot/2024-01-01/") << "</url></mirror></mirrors></settings>\n";
  const std::string command = "env -i PATH=/usr/bin:/bin HOME=" + dir.path().string() + " mvn -B -C -s " +
                              (dir.path() / "settings.xml").string() + " -Dmaven.repo.local=" +
                              (dir.path() / "repository").string() + " -f " + (project / "pom.xml").string() +
                              " validate org.capsule.fixture:fixture-maven-plugin:echo 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("fixture-maven-plugin 1.2"), std::string::npos) << output;
  std::string lower = output;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  EXPECT_EQ(lower.find("checksum"), std::string::npos) << output;
}

// Everything spdlog's default logger says while alive.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return text_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream text_;
};

void replace_line(const fs::path& file, const std::string& coordinate, const std::string& time) {
  std::string text = testing::read_file(file);
  const auto at = text.find(coordinate + " ");
  ASSERT_NE(at, std::string::npos) << coordinate;
  text.replace(at, text.find('\n', at) - at, coordinate + " " + time);
  std::ofstream(file, std::ios::trunc) << text;
}

TEST_F(BareMirror, EditsOfThePublishTimesFileAreIgnoredForRecordedVersionsAndSaidSo) {
  const fs::path times = dir.path() / "publish-times.txt";
  fs::copy_file(fixture.info().at("maven_publish_times").get<std::string>(), times);
  ProxyOptions options = mirror_options(fixture, tree, dir.path() / "cache");
  options.maven_publish_times = times;
  {
    CapturedLog log;
    ServedProxy first(options);
    EXPECT_NE(log.text().find("info maven publish times: " + times.string() + " lists 12 versions, 0 of them already "
                              "recorded"),
              std::string::npos) << log.text();
    EXPECT_NE(log.text().find("never changes, so edits of the file apply only to versions not recorded yet"),
              std::string::npos) << log.text();
    ASSERT_EQ(first.get(kLib + std::string("1.1/lib-1.1.jar")).status, 200u);  // records lib 1.1: 2022-08-01
    EXPECT_EQ(first.get(kLib + std::string("1.2/lib-1.2.jar")).status, 404u);  // records lib 1.2: 2023-03-01
  }
  replace_line(times, "org.capsule.fixture:lib:1.1", "2023-06-01T00:00:00Z");  // after the cutoff now
  replace_line(times, "org.capsule.fixture:lib:2.0", "2022-09-01T00:00:00Z");  // never asked for: takes effect

  CapturedLog log;
  ServedProxy second(options);
  const std::string said = log.text();
  EXPECT_NE(said.find("warning maven publish times: " + times.string() +
                      " says 2023-06-01T00:00:00Z for org.capsule.fixture:lib:1.1, but 2022-08-01T00:00:00Z was "
                      "recorded for it (in " + (dir.path() / "cache/publish-times.sqlite").string() +
                      "); the recorded time stays, so this edit is ignored"),
            std::string::npos) << said;
  EXPECT_EQ(said.find("lib:2.0"), std::string::npos) << said;
  EXPECT_NE(said.find("2 of them already recorded in " + (dir.path() / "cache/publish-times.sqlite").string() +
                      " (1 differently)"),
            std::string::npos) << said;
  EXPECT_EQ(second.get(kLib + std::string("1.1/lib-1.1.jar")).status, 200u);  // the recorded time answers
  EXPECT_EQ(second.get(kLib + std::string("2.0/lib-2.0.jar")).status, 200u);  // the edited, unrecorded one
}

}  // namespace
}  // namespace capsule::proxy

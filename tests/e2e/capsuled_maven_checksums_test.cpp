// A network "proxy" run's Maven against a local mirror without checksum files (as Debian's maven-repo is): with
// strict checksums (`mvn -B -C`) the build passes, and not one line of its output speaks of checksums.
#include <cstdio>

#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

class CapsuledBareMavenMirror : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    const std::string script = std::string(CAPSULE_SOURCE_DIR) + "/tests/proxy/fixtures/package_upstream.py";
    FILE* out = popen(("python3 " + script + " " + (dir_ / "fixture").string()).c_str(), "r");
    ASSERT_NE(out, nullptr);
    char line[4096] = {};
    const bool read = fgets(line, sizeof line, out) != nullptr;
    ASSERT_EQ(pclose(out), 0);
    ASSERT_TRUE(read);
    const json fixture = json::parse(line);
    const fs::path bare = dir_ / "bare-maven";
    fs::copy(fixture["maven_mirror"].get<std::string>(), bare, fs::copy_options::recursive);
    std::vector<fs::path> sums;
    for (const auto& entry : fs::recursive_directory_iterator(bare)) {
      if (entry.path().extension() == ".md5" || entry.path().extension() == ".sha1") sums.push_back(entry.path());
    }
    ASSERT_GT(sums.size(), 10u);
    for (const auto& file : sums) fs::remove(file);
    plugin_built_ = fs::exists(bare / "org/capsule/fixture/fixture-maven-plugin/1.2/fixture-maven-plugin-1.2.jar");
    const json config{{"proxy",
                       {{"pypi_mirror", fixture["pypi_mirror"]},
                        {"maven_mirror", {bare.string()}},
                        {"maven_publish_times", fixture["maven_publish_times"]}}}};
    write_file(dir_ / "config.json", config.dump());
    start({"--config", (dir_ / "config.json").string()});
  }

  bool plugin_built_ = false;
};

TEST_F(CapsuledBareMavenMirror, StrictChecksumsPassWithoutOneChecksumWarning) {
  if (!plugin_built_) GTEST_SKIP() << "the fixture's Maven plugin was not built (no javac or plugin API)";
  const fs::path project = make_dir("maven-project");
  write_file(project / "pom.xml",
             "<project xmlns=\"http://maven.apache.org/POM/4.0.0\">\n"
             "  <modelVersion>4.0.0</modelVersion>\n"
             "  <parent><groupId>org.capsule.fixture</groupId><artifactId>parent</artifactId>"
             "<version>[1.0,2.0)</version><relativePath/></parent>\n"
             "  <artifactId>demo</artifactId><version>1</version><packaging>pom</packaging>\n"
             "</project>\n");
  json spec = sh("mvn -B -C validate org.capsule.fixture:fixture-maven-plugin:echo 2>&1; echo exit=$?");
  spec["network"] = "proxy";
  spec["as_of"] = "2024-01-01";
  spec["workspace"] = {{"path", project.string()}, {"mode", "cow"}};
  spec["cwd"] = "/workspace";
  const json run = run_and_wait(spec);
  ASSERT_EQ(run["state"], "succeeded") << run.dump(2);
  ASSERT_FALSE(run["result"]["stdout"]["truncated"].get<bool>()) << "the whole output is in head";
  const std::string out = run["result"]["stdout"]["head"];
  EXPECT_NE(out.find("fixture-maven-plugin 1.2"), std::string::npos) << out;
  EXPECT_NE(out.find("exit=0\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("hecksum"), std::string::npos) << out;  // "Checksum validation failed", "checksum" warnings
}

}  // namespace
}  // namespace capsule::testing

// Test configuration changes on real files: a Maven pom gaining a surefire <exclude> and <skipTests>, pytest's
// conftest.py, pytest.ini and [pytest] sections, and the scan of an upper layer over its lower (symlinks too).
#include "daemon/record/test_config.h"
#include "tests/support/scratch_dir_test.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace capsule::daemon {
namespace {

using nlohmann::json;

// A pom as Maven projects write them (commons-cli's surefire block, trimmed).
std::string pom(const std::string& surefire_configuration, const std::string& properties = "") {
  return R"(<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId><artifactId>demo</artifactId><version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>)" +
         properties + R"(
  </properties>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <configuration><excludes><exclude>**/Gen*.java</exclude></excludes></configuration>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-surefire-plugin</artifactId>
        <version>3.0.0</version>
        <configuration>
          <includes><include>**/*Test.java</include></includes>)" +
         surefire_configuration + R"(
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
)";
}

TEST(TestConfig, PomSurefireExcludesSkipsAndPropertiesAreNamed) {
  const std::string before = pom("");
  const std::string after = pom("\n          <excludes><exclude>**/Slow*Test.java</exclude></excludes>"
                                "\n          <skipTests>true</skipTests>",
                                "\n    <maven.test.failure.ignore>true</maven.test.failure.ignore>");
  const auto changes = compare_test_config("pom.xml", before, after);
  ASSERT_EQ(changes.size(), 3u) << json(changes.size());
  EXPECT_EQ(changes[0].kind, "maven_tests");
  EXPECT_EQ(changes[0].detail, "build/plugins/plugin[maven-surefire-plugin]/configuration/excludes/exclude: (none) "
                               "-> **/Slow*Test.java");
  EXPECT_EQ(changes[1].detail, "build/plugins/plugin[maven-surefire-plugin]/configuration/skipTests: (none) -> true");
  EXPECT_EQ(changes[2].detail, "properties/maven.test.failure.ignore: (none) -> true");
  EXPECT_TRUE(compare_test_config("pom.xml", before, pom("")).empty()) << "same settings";
  // The compiler plugin's excludes and a reformatted surefire block are not test configuration changes.
  std::string reformatted = before;
  reformatted.replace(reformatted.find("<version>3.0.0</version>"), 24, "<version>3.1.2</version>");
  EXPECT_TRUE(compare_test_config("pom.xml", before, reformatted).empty());
  EXPECT_TRUE(compare_test_config("target/classes/META-INF/maven/demo/pom.xml", std::nullopt, after).empty())
      << "a build's copy of the pom";
  const auto broken = compare_test_config("mod/pom.xml", before, std::string("<project><build>"));
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_EQ(broken[0].kind, "unreadable");
}

TEST(TestConfig, PytestFilesAndSections) {
  const auto added = compare_test_config("conftest.py", std::nullopt, std::string("def pytest_collection_modifyitems(items): pass\n"));
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], (TestConfigChange{"conftest.py", "pytest_conftest", "added"}));
  EXPECT_EQ(compare_test_config("pkg/pytest.ini", std::string("[pytest]\n"), std::nullopt)[0].detail, "deleted");

  const std::string pyproject = "[project]\nname = \"demo\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\n";
  EXPECT_TRUE(compare_test_config("pyproject.toml", pyproject, pyproject + "\n# a comment\n").empty());
  EXPECT_TRUE(compare_test_config("pyproject.toml", pyproject, "[project]\nname = \"other\"\n" +
                                                                   pyproject.substr(pyproject.find("\n\n"))).empty())
      << "another section changed";
  auto changes = compare_test_config("pyproject.toml", pyproject,
                                     pyproject + "addopts2 = \"-k 'not slow'\"\n");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].kind, "pytest_section");
  EXPECT_EQ(changes[0].detail, "[tool.pytest.ini_options] changed");
  changes = compare_test_config("pyproject.toml", std::string("[project]\n"),
                                std::string("[project]\n[tool]\npytest.ini_options.addopts = \"-x\"\n"));
  ASSERT_EQ(changes.size(), 1u) << "a dotted key under [tool]";
  EXPECT_EQ(changes[0].detail, "[tool] added");

  changes = compare_test_config("setup.cfg", std::string("[metadata]\nname = demo\n"),
                                std::string("[metadata]\nname = demo\n[tool:pytest]\naddopts = --deselect x\n"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].detail, "[tool:pytest] added");
  changes = compare_test_config("tox.ini", std::string("[tox]\nenvlist = py3\n[pytest]\nminversion = 7\n"),
                                std::string("[tox]\nenvlist = py3\n"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].detail, "[pytest] removed");
  EXPECT_TRUE(compare_test_config("tox.ini", std::string("[tox]\n"), std::string("[tox]\nenvlist = py3\n")).empty());
  EXPECT_TRUE(compare_test_config("src/main.py", std::nullopt, std::string("x")).empty()) << "not a config file";
}

class TestConfigScanTest : public testing::ScratchDirTest {};

// An upper directory over a lower one, as a cow run leaves them (here without whiteouts).
TEST_F(TestConfigScanTest, AddedModifiedAndSymlinkedConfigurationIsFoundUnchangedCopiesAreNot) {
  const std::string lower = dir_ + "/lower", upper = dir_ + "/upper";
  write("lower/pom.xml", pom(""));
  write("lower/tests/conftest.py", "import pytest\n");
  write("lower/tests/test_a.py", "def test_a(): pass\n");
  write("upper/pom.xml", pom("<skipTests>true</skipTests>"));
  write("upper/conftest.py", "import pytest\ndef pytest_collection_modifyitems(items):\n    pass\n");
  write("upper/tests/conftest.py", "import pytest\n");  // copied up, unchanged
  write("upper/tests/test_a.py", "def test_a(): assert True\n");
  std::filesystem::create_directories(upper + "/sub");
  ASSERT_EQ(::symlink("/etc/hostname", (upper + "/sub/conftest.py").c_str()), 0);
  const WorkspaceDiff diff = diff_upper(upper, lower);
  const TestConfigScan scan = scan_test_config(upper, lower, diff);
  EXPECT_FALSE(scan.truncated);
  const json listed = scan.changes_json();
  ASSERT_EQ(listed.size(), 3u) << listed.dump(1);
  EXPECT_EQ(listed[0], json({{"path", "conftest.py"}, {"kind", "pytest_conftest"}, {"detail", "added"}}));
  EXPECT_EQ(listed[1]["path"], "pom.xml");
  EXPECT_EQ(listed[1]["kind"], "maven_tests");
  EXPECT_EQ(listed[2]["path"], "sub/conftest.py");
  EXPECT_EQ(listed[2]["kind"], "unreadable") << "a symlink is never followed, but it is a change";
  const json violations = scan.violations_json();
  ASSERT_EQ(violations.size(), 3u);
  EXPECT_NE(violations[0]["reason"].get<std::string>().find("protect_test_config: pytest_conftest: added"),
            std::string::npos) << violations[0];
}

TEST_F(TestConfigScanTest, ACutScanIsAViolationOfItsOwn) {
  const std::string lower = dir_ + "/lower", upper = dir_ + "/upper";
  std::filesystem::create_directories(lower);
  for (int i = 0; i < 5; ++i) write("upper/m" + std::to_string(i) + "/conftest.py", "x = 1\n");
  TestConfigLimits limits;
  limits.max_files = 2;
  const TestConfigScan scan = scan_test_config(upper, lower, diff_upper(upper, lower), limits);
  EXPECT_TRUE(scan.truncated);
  EXPECT_EQ(scan.changes.size(), 2u);
  const json violations = scan.violations_json();
  ASSERT_EQ(violations.size(), 3u);
  EXPECT_EQ(violations[2]["path"], "");
}

}  // namespace
}  // namespace capsule::daemon

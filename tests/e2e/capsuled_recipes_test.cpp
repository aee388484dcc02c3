// Integration tests of the toolchain images images/recipes/ builds (python3, python3-base, jdk11/17/21-maven, toolchain
// layers) through a real capsuled: import with labels.json, toolchain versions and ownership inside, offline
// `mvn -B clean verify` end to end under each JDK (class file versions, `--release 8`), `python -m pytest`, toolchain
// selection, and the layers stacked on their base by the daemon (`layers`, and selection of toolchain layers). Runs
// only when CAPSULE_RECIPE_DIR is set. The fixture (the recipe outputs, one image store shared by the suite) is in
// recipes_fixture.h; the record's evidence from these images is tested in capsuled_recipes_evidence_test.cpp.
#include <map>
#include <set>
#include <sstream>

#include "tests/e2e/recipes_fixture.h"

namespace capsule::testing {
namespace {

// ---------------------------------------------------------------------------------------------------------

TEST_F(CapsuledRecipes, ImportsEveryRecipeImageWithItsLabels) {
  std::size_t images = 0;
  for (const Recipe& recipe : recipes_) {
    if (recipe.is_layer()) continue;  // not a runnable root alone: see ToolchainLayersStackedOnTheirBase
    SCOPED_TRACE(recipe.name);
    ++images;
    const json image = ensure_image(recipe);
    ASSERT_TRUE(image.is_object() && image.contains("digest")) << image;
    EXPECT_EQ(image["refs"], json::array({recipe.ref()}));
    EXPECT_EQ(image["layers"].size(), 1u) << "a rootfs import is one layer";
    EXPECT_EQ(image["config"]["labels"], recipe.labels) << "labels.json, verbatim";
    json toolchains = json::object();
    for (const auto& [key, value] : recipe.labels.items()) {
      if (key.starts_with(kToolchainPrefix)) toolchains[key.substr(std::string(kToolchainPrefix).size())] = value;
    }
    EXPECT_FALSE(toolchains.empty()) << "a recipe image names its toolchains";
    EXPECT_EQ(image["toolchains"], toolchains);
    // Listed, and found by digest.
    const json listed = body_json(call("GET", "/v1/images"));
    EXPECT_TRUE(std::any_of(listed["images"].begin(), listed["images"].end(),
                            [&](const json& entry) { return entry["digest"] == image["digest"]; }))
        << listed.dump();
    EXPECT_EQ(body_json(call("GET", "/v1/images/" + http::url_encode(image["digest"].get<std::string>())))["refs"],
              image["refs"]);
  }
  if (images == 0) GTEST_SKIP() << "only toolchain layers in " << recipe_root() << "; " << kHowToBuild;
}

TEST_F(CapsuledRecipes, JdkImagesRunJavaAndMaven) {
  const std::vector<const Recipe*> jdks = image_recipes({"java", "maven"});
  if (jdks.empty()) GTEST_SKIP() << "no jdk*-maven output in " << recipe_root() << "; " << kHowToBuild;
  for (const Recipe* jdk : jdks) {
    SCOPED_TRACE(jdk->name);
    check_jdk_image(*jdk);
  }
}

TEST_F(CapsuledRecipes, PythonImageRunsPythonAndPip) {
  const Recipe* python = python_recipe(true);
  if (python == nullptr) GTEST_SKIP() << "no python3 output in " << recipe_root() << "; " << kHowToBuild;
  const json image = ensure_image(*python);
  ASSERT_FALSE(HasFailure());
  const std::string version = python->toolchain("python"), pip = python->toolchain("pip");

  const json python_run = run_in(python->ref(), {"python3", "-V"});
  ASSERT_EQ(python_run.value("state", ""), "succeeded") << describe(python_run);
  EXPECT_EQ(python_run["pinned"]["image_digests"], json::array({image["digest"]}));
  EXPECT_EQ(logs(python_run, "stdout"), "Python " + version + "\n");

  const json pip_run = run_in(python->ref(), {"pip", "--version"});
  ASSERT_EQ(pip_run.value("state", ""), "succeeded") << describe(pip_run);
  const std::string pip_says = logs(pip_run, "stdout");
  EXPECT_EQ(pip_says.rfind("pip " + pip + " from ", 0), 0u) << pip_says;
  EXPECT_NE(pip_says.find("(python " + major_minor(version) + ")"), std::string::npos) << pip_says;

  if (const std::string pytest = python->toolchain("pytest"); !pytest.empty()) {
    const json pytest_run = run_in(python->ref(), {"/bin/sh", "-c", "python3 -m pytest --version 2>&1"});
    ASSERT_EQ(pytest_run.value("state", ""), "succeeded") << describe(pytest_run);
    EXPECT_NE(logs(pytest_run, "stdout").find("pytest " + pytest), std::string::npos) << logs(pytest_run, "stdout");
  }

  expect_root_owned(*python, {"/usr/bin/python3", "/usr/bin/python" + major_minor(version), "/usr/bin/pip",
                              "/usr/lib/python3/dist-packages/pip/__init__.py"});
}

// python3.sh's `python` command (python-is-python3) runs pytest on a workspace's tests; the image python3.sh
// --without-test-tools builds has python and pip but no pytest, so a run's own (date-masked) install decides it.
TEST_F(CapsuledRecipes, PythonCommandRunsPytestAndTheBaseImageHasNoTestTools) {
  const Recipe* with_tests = python_recipe(true);
  const Recipe* base = python_recipe(false);
  if (with_tests == nullptr || base == nullptr) {
    GTEST_SKIP() << "needs the python3 and python3-base outputs in " << recipe_root() << "; " << kHowToBuild;
  }
  ensure_image(*with_tests);
  ensure_image(*base);
  ASSERT_FALSE(HasFailure());

  const fs::path workspace = make_dir("pytest-project");
  write_file(workspace / "test_calc.py",
             "def add(a, b):\n    return a + b\n\n\ndef test_adds():\n    assert add(2, 3) == 5\n\n\n"
             "def test_joins():\n    assert add('a', 'b') == 'ab'\n");
  const json pytest_run =
      run_in(with_tests->ref(), {"python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=report.xml"},
             {{"workspace", {{"path", workspace.string()}, {"mode", "cow"}}},
              {"collect", {{"junit", {"report.xml"}}}},
              {"network", "none"}});
  ASSERT_EQ(pytest_run.value("state", ""), "succeeded") << describe(pytest_run);
  EXPECT_NE(logs(pytest_run, "stdout").find("2 passed"), std::string::npos) << logs(pytest_run, "stdout");
  EXPECT_EQ(pytest_run["tests"]["total"], 2) << pytest_run.dump();
  EXPECT_EQ(pytest_run["tests"]["failed"], 0) << pytest_run.dump();

  EXPECT_FALSE(base->labels.contains(std::string(kToolchainPrefix) + "pytest")) << base->labels.dump();
  const json python_run = run_in(base->ref(), {"python", "-V"});
  ASSERT_EQ(python_run.value("state", ""), "succeeded") << describe(python_run);
  EXPECT_EQ(logs(python_run, "stdout"), "Python " + base->toolchain("python") + "\n");
  const json no_pytest = run_in(base->ref(), {"python3", "-c", "import pytest"});
  EXPECT_EQ(no_pytest.value("state", ""), "failed") << describe(no_pytest);
  EXPECT_EQ(no_pytest["result"]["exit_code"], 1) << describe(no_pytest);
  EXPECT_NE(logs(no_pytest, "stderr").find("No module named 'pytest'"), std::string::npos) << logs(no_pytest, "stderr");
}

// A Maven project with two JUnit 5 test classes: 5 tests, one @Disabled; Java 17 sources (a record).
void write_maven_project(const fs::path& root) {
  fs::create_directories(root / "src/main/java/demo");
  fs::create_directories(root / "src/main/resources");
  fs::create_directories(root / "src/test/java/demo");
  write_file(root / "pom.xml", R"(<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId>
  <artifactId>recipe-e2e</artifactId>
  <version>1.0-SNAPSHOT</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>17</maven.compiler.release>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <version>5.9.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
</project>
)");
  write_file(root / "src/main/java/demo/Calc.java", R"(package demo;

public final class Calc {
  public record Pair(int left, int right) {
    public int sum() { return left + right; }
  }

  public static int add(int a, int b) { return new Pair(a, b).sum(); }

  public static String greeting() throws java.io.IOException {
    java.util.Properties properties = new java.util.Properties();
    try (java.io.InputStream in = Calc.class.getResourceAsStream("/demo.properties")) { properties.load(in); }
    return properties.getProperty("greeting");
  }
}
)");
  write_file(root / "src/main/resources/demo.properties", "greeting=hello\n");
  write_file(root / "src/test/java/demo/CalcTest.java", R"(package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

class CalcTest {
  @Test void adds() { assertEquals(5, Calc.add(2, 3)); }
  @Test void readsTheResource() throws Exception { assertEquals("hello", Calc.greeting()); }
  @Disabled("skipped on purpose: the run must count it as skipped")
  @Test void notYet() { assertEquals(0, 1); }
}
)");
  write_file(root / "src/test/java/demo/PairTest.java", R"(package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import org.junit.jupiter.api.Test;

class PairTest {
  @Test void recordsCompareByValue() { assertEquals(new Calc.Pair(1, 2), new Calc.Pair(1, 2)); }
  @Test void differentPairsDiffer() { assertNotEquals(new Calc.Pair(1, 2), new Calc.Pair(2, 1)); }
}
)");
}

TEST_F(CapsuledRecipes, OfflineMavenBuildInCowWorkspace) {
  const Recipe* jdk = jdk_recipe("17");  // the project's sources are Java 17
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  const json image = ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  const fs::path workspace = make_dir("maven-project");
  write_maven_project(workspace);
  const auto before = snapshot_tree(workspace);

  const json spec = {{"image", jdk->ref()},
                     {"argv", {"mvn", "-B", "clean", "verify"}},
                     {"workspace", {{"path", workspace.string()}, {"mode", "cow"}}},
                     {"collect", {{"junit", {"target/surefire-reports/*.xml"}}}},
                     {"limits", {{"wall_time", "10m"}, {"memory", "2g"}}},
                     {"network", "none"}};
  const auto start = Clock::now();
  const json run = run_and_wait(spec);
  ASSERT_TRUE(run.is_object() && run.contains("result") && run["result"].is_object()) << run.dump();
  const json& record = run["result"];
  note("mvn -B clean verify: " + run.value("state", "?") + " in " + std::to_string(seconds_since(start)) +
       " s (wall_ms " + std::to_string(record.value("wall_ms", 0)) + ", cpu user+sys ms " +
       std::to_string(record.value("cpu_user_ms", 0) + record.value("cpu_sys_ms", 0)) + ", peak memory " +
       std::to_string(record.value("peak_memory_bytes", 0) / 1000000) + " MB, setup " +
       (record.contains("setup_ms") ? record["setup_ms"].value("total", json()).dump() : "?") + " ms)");
  const std::string out = logs(run, "stdout");
  ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run) << "\n--- full stdout:\n" << out;
  EXPECT_EQ(record["exit_code"], 0);
  EXPECT_EQ(run["pinned"]["image_digests"], json::array({image["digest"]}));
  EXPECT_EQ(run["spec"]["network"], "none");
  EXPECT_EQ(run["spec"]["limits"]["wall_time"], 600000);
  EXPECT_EQ(run["spec"]["limits"]["memory"], 2LL << 30);
  EXPECT_NE(out.find("Tests run: 5, Failures: 0, Errors: 0, Skipped: 1"), std::string::npos) << out;
  EXPECT_NE(out.find("BUILD SUCCESS"), std::string::npos) << out;

  // record.tests from the two Surefire reports.
  ASSERT_TRUE(run.contains("tests")) << record.dump();
  const json& tests = run["tests"];
  EXPECT_EQ(tests["total"], 5) << tests.dump();
  EXPECT_EQ(tests["skipped"], 1) << tests.dump();
  EXPECT_EQ(tests["failed"], 0) << tests.dump();
  EXPECT_EQ(tests["errors"], 0) << tests.dump();
  EXPECT_EQ(tests["files"], json::array({"target/surefire-reports/TEST-demo.CalcTest.xml",
                                         "target/surefire-reports/TEST-demo.PairTest.xml"}))
      << tests.dump();
  EXPECT_TRUE(!tests.contains("unreadable") || tests["unreadable"].empty()) << tests.dump();
  EXPECT_FALSE(run.contains("collect_error")) << record.dump();

  // The diff: everything the build wrote is under target/, nothing of the sources changed.
  ASSERT_TRUE(run.contains("diff")) << record.dump();
  const json& diff = run["diff"];
  std::set<std::string> added;
  for (const auto& entry : diff["added"]) added.insert(entry["path"].get<std::string>());
  for (const auto& path : added) EXPECT_TRUE(path.starts_with("target/")) << path << " added outside target/";
  for (const char* path : {"target/classes/demo/Calc.class", "target/classes/demo/Calc$Pair.class",
                           "target/classes/demo.properties", "target/test-classes/demo/CalcTest.class",
                           "target/test-classes/demo/PairTest.class", "target/recipe-e2e-1.0-SNAPSHOT.jar",
                           "target/surefire-reports/TEST-demo.CalcTest.xml",
                           "target/surefire-reports/TEST-demo.PairTest.xml"}) {
    EXPECT_TRUE(added.count(path)) << path << " missing from diff.added: " << diff["added"].dump();
  }
  EXPECT_TRUE(diff["modified"].empty()) << diff["modified"].dump();
  EXPECT_TRUE(diff["deleted"].empty()) << diff["deleted"].dump();
  note("diff: " + std::to_string(added.size()) + " files added under target/");

  // The host workspace is untouched: same files, modes, owners and contents; no target/.
  EXPECT_FALSE(fs::exists(workspace / "target"));
  EXPECT_EQ(snapshot_tree(workspace), before) << "a cow workspace must not change on the host";
}

// A Maven project in Java 8 (a lambda, streams, a JUnit 5 test class of 3 tests) compiled for `release`
// (maven.compiler.release) against `junit` (a JUnit 5 version the image's Debian repository has).
void write_java8_project(const fs::path& root, const std::string& junit, const std::string& release) {
  fs::create_directories(root / "src/main/java/demo");
  fs::create_directories(root / "src/test/java/demo");
  write_file(root / "pom.xml", R"(<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId>
  <artifactId>java8-e2e</artifactId>
  <version>1.0-SNAPSHOT</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>)" + release + R"(</maven.compiler.release>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <version>)" + junit + R"(</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
</project>
)");
  write_file(root / "src/main/java/demo/Words.java", R"(package demo;

import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;

public final class Words {
  private Words() {}

  public static List<String> longerThan(int length, String... words) {
    return Arrays.stream(words).filter(word -> word.length() > length).collect(Collectors.toList());
  }

  public static String initials(String text) {
    return Arrays.stream(text.split(" ")).map(word -> word.substring(0, 1)).collect(Collectors.joining());
  }
}
)");
  write_file(root / "src/test/java/demo/WordsTest.java", R"(package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.Collections;
import org.junit.jupiter.api.Test;

class WordsTest {
  @Test void keepsLongWords() { assertEquals(Arrays.asList("gamma"), Words.longerThan(4, "beta", "gamma", "pi")); }
  @Test void keepsNothing() { assertEquals(Collections.emptyList(), Words.longerThan(9, "beta")); }
  @Test void initials() { assertEquals("ajs", Words.initials("as java sources")); }
}
)");
}

// Prints "<path>: <its first 8 bytes in hex>" (od -An -tx1 -N8) for each class file the Java 8 project builds.
constexpr const char* kShowClassHeaders =
    "for f in target/classes/demo/Words.class target/test-classes/demo/WordsTest.class; do "
    "echo \"$f:$(od -An -tx1 -N8 \"$f\")\"; done";

// The major version of the class file `path` from the kShowClassHeaders line naming it: bytes 6-7 (big-endian)
// after the magic 0xCAFEBABE and the minor version; -1 when the line is missing or not a class file's header.
int class_major_version(const std::string& output, const std::string& path) {
  for (const std::string& line : lines_of(output)) {
    if (!line.starts_with(path + ":")) continue;
    std::istringstream hex(line.substr(path.size() + 1));
    std::vector<int> bytes;
    for (std::string byte; hex >> byte;) bytes.push_back(std::stoi(byte, nullptr, 16));
    if (bytes.size() != 8 || bytes[0] != 0xCA || bytes[1] != 0xFE || bytes[2] != 0xBA || bytes[3] != 0xBE) return -1;
    return bytes[6] << 8 | bytes[7];
  }
  return -1;
}

// The migrations' targets: a JUnit project builds offline under JDK 11 and JDK 21, each chosen by
// `toolchains: {"java": N}`, into class files of major 55 and 65; its Java 8 sources built with --release 8
// (maven.compiler.release=8) under the same JDKs give major 52.
TEST_F(CapsuledRecipes, MavenBuildsUnderJdk11And21ChosenByToolchains) {
  const std::vector<std::pair<std::string, int>> jdks = {{"11", 55}, {"21", 65}};
  for (const auto& [java_major, class_major] : jdks) {
    if (jdk_recipe(java_major) == nullptr) {
      GTEST_SKIP() << "no jdk" << java_major << "-maven output in " << recipe_root() << "; " << kHowToBuild;
    }
  }
  for (const auto& [java_major, class_major] : jdks) {
    SCOPED_TRACE("java " + java_major);
    const Recipe& jdk = *jdk_recipe(java_major);
    const std::string digest = ensure_image(jdk).value("digest", "");
    ASSERT_FALSE(HasFailure());
    // The JUnit 5 version Debian packages in the JDK's suite (the image resolves only those offline).
    const json listed = run_in(jdk.ref(), {"/bin/sh", "-c",
                                           "ls /usr/share/maven-repo/org/junit/jupiter/junit-jupiter | "
                                           "grep -E '^[0-9][0-9.]*$' | sort -V | tail -n1"});
    ASSERT_EQ(listed.value("state", ""), "succeeded") << describe(listed);
    const std::string junit = lines_of(logs(listed, "stdout")).at(0);

    for (const std::string& release : {java_major, std::string("8")}) {
      SCOPED_TRACE("release " + release);
      const fs::path workspace = make_dir("java8-jdk" + java_major + "-release" + release);
      write_java8_project(workspace, junit, release);
      const auto start = Clock::now();
      const json run = run_and_wait({{"toolchains", {{"java", java_major}}},
                                     {"argv", {"/bin/sh", "-c", std::string("mvn -B clean verify && ") + kShowClassHeaders}},
                                     {"workspace", {{"path", workspace.string()}, {"mode", "cow"}}},
                                     {"collect", {{"junit", {"target/surefire-reports/*.xml"}}}},
                                     {"limits", {{"wall_time", "10m"}, {"memory", "2g"}}},
                                     {"network", "none"}});
      const std::string out = logs(run, "stdout");
      ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run) << "\n--- full stdout:\n" << out;
      note("java " + java_major + " (" + jdk.ref() + "), --release " + release + ": mvn -B clean verify in " +
           std::to_string(seconds_since(start)) + " s");
      EXPECT_EQ(run["pinned"]["image_digests"], json::array({digest}));
      EXPECT_EQ(run["pinned"]["image_choice"]["provided"], json({{"java", jdk.toolchain("java")}}));
      EXPECT_NE(out.find("BUILD SUCCESS"), std::string::npos) << out;
      EXPECT_EQ(run["tests"]["total"], 3) << run.dump();
      EXPECT_EQ(run["tests"]["failed"], 0) << run.dump();
      EXPECT_EQ(run["tests"]["errors"], 0) << run.dump();
      const int expected = release == "8" ? 52 : class_major;
      EXPECT_EQ(class_major_version(out, "target/classes/demo/Words.class"), expected) << out;
      EXPECT_EQ(class_major_version(out, "target/test-classes/demo/WordsTest.class"), expected) << out;
    }
  }
}

TEST_F(CapsuledRecipes, ToolchainSelectionPicksTheRecipeImages) {
  const std::vector<const Recipe*> jdks = image_recipes({"java", "maven"});
  const std::vector<const Recipe*> pythons = image_recipes({"python"});
  const Recipe* python = python_recipe(true);
  if (jdks.empty() || python == nullptr) {
    GTEST_SKIP() << "needs the jdk*-maven and the python3 outputs in " << recipe_root() << "; " << kHowToBuild;
  }
  std::map<const Recipe*, std::string> digests;  // every JDK and python image installed: they compete
  for (const Recipe* recipe : jdks) digests[recipe] = ensure_image(*recipe).value("digest", "");
  for (const Recipe* recipe : pythons) digests[recipe] = ensure_image(*recipe).value("digest", "");
  ASSERT_FALSE(HasFailure());

  // Each JDK image by its major version (jdk11-maven by {"java": "11"}, ...).
  for (const Recipe* jdk : jdks) {
    SCOPED_TRACE(jdk->name);
    const std::string java = jdk->toolchain("java");
    const json by_java = run_and_wait({{"toolchains", {{"java", major(java)}}}, {"argv", {"java", "-version"}}});
    ASSERT_EQ(by_java.value("state", ""), "succeeded") << describe(by_java);
    EXPECT_EQ(by_java["pinned"]["image_choice"]["images"][0]["ref"], jdk->ref());
    EXPECT_EQ(by_java["pinned"]["image_digests"], json::array({digests[jdk]}));
    const json& java_choice = by_java["pinned"]["image_choice"];
    EXPECT_EQ(java_choice["wanted"], json({{"java", major(java)}})) << java_choice.dump();
    EXPECT_EQ(java_choice["provided"], json({{"java", java}})) << java_choice.dump();
    EXPECT_EQ(java_choice["matching_images"], 1) << java_choice.dump();
    EXPECT_FALSE(java_choice.value("reason", "").empty()) << java_choice.dump();
    EXPECT_NE(logs(by_java, "stderr").find("version \"" + java + "\""), std::string::npos) << logs(by_java, "stderr");
    note("java " + major(java) + " -> " + jdk->ref() + ": " + java_choice.value("reason", ""));

    const json by_both = run_and_wait(
        {{"toolchains", {{"java", major(java)}, {"maven", major_minor(jdk->toolchain("maven"))}}}, {"argv", {"true"}}});
    EXPECT_EQ(by_both.value("state", ""), "succeeded") << describe(by_both);
    EXPECT_EQ(by_both["pinned"]["image_digests"], json::array({digests[jdk]}));
  }

  // python3 and python3-base provide the same python: {"python": X.Y} takes one of them (the newest built at equal
  // versions); asking for pytest too takes python3.
  const std::string version = python->toolchain("python"), pytest = python->toolchain("pytest");
  const auto same_python = std::count_if(pythons.begin(), pythons.end(), [&](const Recipe* recipe) {
    return major_minor(recipe->toolchain("python")) == major_minor(version);
  });
  const json by_python =
      run_and_wait({{"toolchains", {{"python", major_minor(version)}}}, {"argv", {"python3", "-V"}}});
  ASSERT_EQ(by_python.value("state", ""), "succeeded") << describe(by_python);
  const json& python_choice = by_python["pinned"]["image_choice"];
  EXPECT_TRUE(std::any_of(pythons.begin(), pythons.end(), [&](const Recipe* recipe) {
    return python_choice["images"][0]["ref"] == recipe->ref();
  })) << python_choice.dump();
  EXPECT_EQ(python_choice["wanted"], json({{"python", major_minor(version)}})) << python_choice.dump();
  EXPECT_EQ(python_choice["provided"], json({{"python", version}})) << python_choice.dump();
  EXPECT_EQ(python_choice["matching_images"], same_python) << python_choice.dump();
  EXPECT_EQ(logs(by_python, "stdout"), "Python " + version + "\n");
  note("python " + major_minor(version) + " -> " + python_choice["images"][0].value("ref", "") + ": " +
       python_choice.value("reason", ""));

  const json with_pytest = run_and_wait(
      {{"toolchains", {{"python", major_minor(version)}, {"pytest", major(pytest)}}}, {"argv", {"true"}}});
  ASSERT_EQ(with_pytest.value("state", ""), "succeeded") << describe(with_pytest);
  EXPECT_EQ(with_pytest["pinned"]["image_digests"], json::array({digests[python]}));
  EXPECT_EQ(with_pytest["pinned"]["image_choice"]["matching_images"], 1) << with_pytest["pinned"].dump();

  // The JDK images have a python3 too (a build-time tool of the recipe) but no python label: never chosen for it.
  for (const Recipe* jdk : jdks) EXPECT_NE(digests[python], digests[jdk]);
  expect_error(call("POST", "/v1/runs", {{"toolchains", {{"java", "8"}}}, {"argv", {"true"}}}), 404,
               "no_matching_image", "java");
}

// toolchain-layer.sh outputs hold only /opt/<toolchain> and /usr/local/bin links: not runnable alone. capsuled
// stacks them on their base at run time: explicitly (`layers`), and when toolchain selection picks them through
// their org.capsule.layer.base label, which toolchain-layer.sh --base wrote into labels.json: the base recipe's
// import ref (capsule/python3:bookworm), so labels.json is imported as it is.
TEST_F(CapsuledRecipes, ToolchainLayersStackedOnTheirBase) {
  const std::vector<const Recipe*> layers = layer_recipes();
  if (layers.empty()) GTEST_SKIP() << "no toolchain-layer.sh outputs in " << recipe_root();

  for (const Recipe* layer : layers) {
    SCOPED_TRACE(layer->name);
    const std::string base_ref = layer->labels.value(kLayerBaseLabel, "");
    ASSERT_FALSE(base_ref.empty()) << "labels.json of a layer built with --base names its base: "
                                   << layer->labels.dump();
    const auto base_it = std::find_if(recipes_.begin(), recipes_.end(),
                                      [&](const Recipe& recipe) { return !recipe.is_layer() && recipe.ref() == base_ref; });
    ASSERT_NE(base_it, recipes_.end()) << "no recipe output in " << recipe_root() << " is imported as " << base_ref;
    const Recipe* base = &*base_it;
    const std::string base_digest = ensure_image(*base).value("digest", "");
    ASSERT_FALSE(HasFailure());
    const std::string layer_path = layer->labels.value("org.capsule.layer.path", "");
    if (!layer->tree.empty()) {
      EXPECT_FALSE(fs::exists(layer->tree / "bin/sh") || fs::exists(layer->tree / "usr/bin/sh"))
          << "a layer is expected to lack a shell (it is not a root of its own)";
      EXPECT_TRUE(fs::is_directory(layer->tree / fs::path(layer_path).relative_path())) << layer_path;
    }
    const json image = ensure_image(*layer);
    ASSERT_FALSE(HasFailure());
    EXPECT_EQ(image["config"]["labels"], layer->labels);
    const json stacked = json::array({base_digest, image.value("digest", "")});

    const std::string tool = !layer->toolchain("python").empty() ? "python" : "java";
    const std::string version = layer->toolchain(tool);
    ASSERT_FALSE(version.empty()) << layer->labels.dump();
    const std::string script =
        (tool == "python"
             ? "command -v python3; python3 -c 'import sys, ssl, sqlite3, zlib, ctypes; print(sys.version.split()[0], "
               "sys.prefix)'; pip --version; stat -c '%u:%g %n' " + layer_path + "/bin/python3"
             : "command -v java; java -version 2>&1 | head -n1; java -XshowSettings:properties -version 2>&1 | "
               "sed -n 's/^ *java.home = //p'; stat -c '%u:%g %n' " + layer_path + "/bin/java") +
        "; echo HOME=$HOME";
    // The toolchain runs from the layer's path, found by PATH, root-owned, with HOME from the base's passwd.
    const auto expect_layer_runs = [&](const json& run) {
      ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run);
      EXPECT_EQ(run["pinned"]["image_digests"], stacked);
      const std::vector<std::string> lines = lines_of(logs(run, "stdout"));
      ASSERT_EQ(lines.size(), 5u) << logs(run, "stdout");
      EXPECT_EQ(lines[0], "/usr/local/bin/" + std::string(tool == "python" ? "python3" : "java"));
      if (tool == "python") {
        EXPECT_EQ(lines[1], version + " " + layer_path);
        if (const std::string pip = layer->toolchain("pip"); !pip.empty()) {
          EXPECT_EQ(lines[2].rfind("pip " + pip + " from " + layer_path + "/", 0), 0u) << lines[2];
        }
        EXPECT_EQ(lines[3], "0:0 " + layer_path + "/bin/python3");
      } else {
        EXPECT_NE(lines[1].find("version \"" + version + "\""), std::string::npos) << lines[1];
        EXPECT_EQ(lines[2], layer_path);
        EXPECT_EQ(lines[3], "0:0 " + layer_path + "/bin/java");
      }
      EXPECT_EQ(lines[4], "HOME=/root");
    };

    // 1. Stacked explicitly.
    const json by_layers = run_in(base->ref(), {"/bin/sh", "-ec", script}, {{"layers", {layer->ref()}}});
    expect_layer_runs(by_layers);
    EXPECT_EQ(by_layers["spec"]["layers"], json::array({layer->ref()}));

    // 2. Chosen by its toolchain (the exact version: other layers may share the minor), stacked on its base.
    const auto start = Clock::now();
    const json by_toolchain = run_and_wait({{"toolchains", {{tool, version}}}, {"argv", {"/bin/sh", "-ec", script}},
                                            {"limits", {{"wall_time", "2m"}}}});
    expect_layer_runs(by_toolchain);
    const json& choice = by_toolchain["pinned"]["image_choice"];
    EXPECT_EQ(choice["images"][0]["ref"], base->ref());
    EXPECT_EQ(choice["provided"], json({{tool, version}})) << choice.dump();
    EXPECT_EQ(choice["images"][1]["ref"], layer->ref()) << choice.dump();
    note(tool + " " + version + " -> " + choice.value("reason", "") + " in " + std::to_string(seconds_since(start)) +
         " s");
  }
}

// Sessions in the recipe images (issue 12): an incremental `mvn verify` reuses target/ from the exec before it
// (no `clean`, as FreshBrew's agent runs it), and a venv made by one exec is used by the next.
TEST_F(CapsuledRecipes, ASessionKeepsMavenTargetAndAVenvBetweenExecs) {
  const Recipe* jdk = jdk_recipe("17");  // the project's sources are Java 17
  const Recipe* python = python_recipe(true);
  if (jdk == nullptr || python == nullptr) {
    GTEST_SKIP() << "needs both the jdk17-maven and the python3 outputs in " << recipe_root() << "; " << kHowToBuild;
  }
  ensure_image(*jdk);
  ensure_image(*python);
  ASSERT_FALSE(HasFailure());
  const fs::path workspace = make_dir("maven-session");
  write_maven_project(workspace);
  auto create = [&](const json& spec) {
    const HttpResponse made = call("POST", "/v1/sessions", spec);
    EXPECT_EQ(made.status, 201) << made.body;
    return body_json(made)["id"].get<std::string>();
  };
  auto exec = [&](const std::string& id, const json& spec) {
    const HttpResponse done = call("POST", "/v1/sessions/" + id + "/exec", spec);
    EXPECT_EQ(done.status, 200) << done.body;
    return body_json(done);
  };
  const std::string maven = create({{"image", jdk->ref()},
                                    {"workspace", {{"path", workspace.string()}, {"mode", "cow"}}},
                                    {"limits", {{"wall_time", "10m"}, {"memory", "2g"}}}});
  const json first = exec(maven, {{"argv", {"mvn", "-B", "verify"}}});
  ASSERT_EQ(first.value("state", ""), "succeeded") << describe(first) << logs(first, "stdout");
  EXPECT_NE(logs(first, "stdout").find("Compiling 2 source files"), std::string::npos) << logs(first, "stdout");
  const json second = exec(maven, {{"argv", {"mvn", "-B", "verify"}}});
  ASSERT_EQ(second.value("state", ""), "succeeded") << describe(second);
  const std::string incremental = logs(second, "stdout");
  EXPECT_NE(incremental.find("Nothing to compile - all classes are up to date"), std::string::npos) << incremental;
  EXPECT_NE(incremental.find("Tests run: 5, Failures: 0, Errors: 0, Skipped: 1"), std::string::npos) << incremental;
  note("mvn verify in a session: first " + std::to_string(first["result"].value("wall_ms", 0.0)) + " ms, second " +
       std::to_string(second["result"].value("wall_ms", 0.0)) + " ms (target/ reused)");
  const json diff = body_json(call("GET", "/v1/sessions/" + maven + "/diff"));
  EXPECT_GT(diff["totals"]["added"].get<int>(), 5) << diff;
  EXPECT_EQ(diff["totals"]["modified"], 0) << diff;
  EXPECT_FALSE(fs::exists(workspace / "target")) << "a cow workspace must not change on the host";

  const std::string venv = create({{"image", python->ref()}});
  const json made = exec(venv, {{"script", "python3 -m venv --without-pip /tmp/venv && echo made"}});
  ASSERT_EQ(made.value("state", ""), "succeeded") << describe(made);
  const json used = exec(venv, {{"script", ". /tmp/venv/bin/activate && python -c 'import sys; print(sys.prefix)'"}});
  ASSERT_EQ(used.value("state", ""), "succeeded") << describe(used);
  EXPECT_EQ(logs(used, "stdout"), "/tmp/venv\n");
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + maven).status, 200);
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + venv).status, 200);
}

}  // namespace
}  // namespace capsule::testing

// The evidence a migration harness reads from the record, from real builds in the recipe images (offline Maven in
// jdk17-maven, python3): the box's limits as the JVM, nproc and Python see them, test cases from Surefire's XML,
// a compile error told apart from a project without tests, the class-file census, JaCoCo coverage, the signal
// that ended a java that ignores SIGTERM, and a surefire exclude or skipTests caught by the verdict. Part of the
// CapsuledRecipes suite (recipes_fixture.h).
#include <map>
#include <regex>
#include <string>

#include "tests/e2e/recipes_fixture.h"

namespace capsule::testing {
namespace {

constexpr const char* kJunitVersion = "5.9.2";  // bookworm's JUnit 5, what jdk17-maven resolves offline

// A Maven project at `root` for Java `release` with JUnit `junit` (5.x) as a test dependency: `build` goes into
// <build>, `files` (relative path -> text) are written below it.
void write_maven_project(const fs::path& root, const std::map<std::string, std::string>& files,
                         const std::string& build = "", const std::string& junit = kJunitVersion,
                         const std::string& release = "17") {
  write_file(root / "pom.xml", R"(<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId>
  <artifactId>evidence</artifactId>
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
  <build>)" + build + R"(</build>
</project>
)");
  for (const auto& [path, text] : files) {
    fs::create_directories((root / path).parent_path());
    write_file(root / path, text);
  }
}

constexpr const char* kSign = R"(package demo;

public final class Sign {
  private Sign() {}

  public static String of(int value) {
    if (value < 0) {
      return "negative";
    }
    return "positive";
  }
}
)";

// The sandbox mounts its own cgroups read-only at /sys/fs/cgroup and sets its CPU affinity: the JVM sizes itself
// from the limits with no flags, and nproc and Python count the CPUs granted.
TEST_F(CapsuledRecipes, TheBoxShowsItsLimitsToJavaMavenAndPython) {
  const Recipe* jdk = jdk_recipe("17");
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  const json settings = run_in(jdk->ref(),
                               {"/bin/sh", "-c",
                                "java -XshowSettings:system -version 2>&1; "
                                "java -XX:+PrintFlagsFinal -version 2>/dev/null | grep -w MaxHeapSize; nproc"},
                               {{"limits", {{"wall_time", "2m"}, {"memory", "256m"}, {"cpus", 1}}}});
  ASSERT_EQ(settings.value("state", ""), "succeeded") << describe(settings);
  const std::string says = logs(settings, "stdout");
  EXPECT_NE(says.find("Memory Limit: 256.00M"), std::string::npos) << says;
  EXPECT_NE(says.find("Effective CPU Count: 1\n"), std::string::npos) << says;
  EXPECT_TRUE(says.ends_with("\n1\n")) << "nproc: " << says;
  // The default heap is sized from the memory the JVM sees: a quarter of it, but at least JDK 17's default
  // (126 MiB) while that is under half of it; from the host's memory it would be GBs.
  std::smatch heap;
  ASSERT_TRUE(std::regex_search(says, heap, std::regex("MaxHeapSize += ([0-9]+)"))) << says;
  EXPECT_LE(std::stoll(heap[1]), 128LL << 20) << says;

  // A JVM build (Maven and surefire's forked JVM) under 512 MiB with no heap flags anywhere.
  const fs::path workspace = make_dir("limits-project");
  write_maven_project(workspace, {{"src/main/java/demo/Sign.java", kSign},
                                  {"src/test/java/demo/SignTest.java", R"(package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class SignTest {
  @Test void positive() { assertEquals("positive", Sign.of(3)); }
  @Test void negative() { assertEquals("negative", Sign.of(-3)); }
}
)"}});
  const json built = run_on_copy(jdk->ref(), workspace,
                           "test -z \"$MAVEN_OPTS$JAVA_TOOL_OPTIONS$_JAVA_OPTIONS$JDK_JAVA_OPTIONS\" || "
                           "{ echo 'JVM options set in the image' >&2; exit 99; }; mvn -B -o clean verify",
                           {{"junit", {"target/surefire-reports/*.xml"}}},
                           {{"wall_time", "10m"}, {"memory", "512m"}, {"cpus", 1}});
  ASSERT_EQ(built.value("state", ""), "succeeded") << describe(built) << "\n--- stdout:\n" << logs(built, "stdout");
  EXPECT_EQ(built["spec"]["limits"]["memory"], 512LL << 20);
  EXPECT_EQ(built["result"]["oom_kills"], 0);
  EXPECT_EQ(built["tests"]["total"], 2) << built["tests"];
  EXPECT_EQ(built["tests"]["failed"], 0) << built["tests"];
  note("mvn -B -o clean verify under 512m, 1 cpu: peak memory " +
       std::to_string(built["result"].value("peak_memory_bytes", 0LL) / 1000000) + " MB");

  const Recipe* python = python_recipe(true);
  if (python == nullptr) GTEST_SKIP() << "no python3 output in " << recipe_root() << ": Python not checked";
  ensure_image(*python);
  ASSERT_FALSE(HasFailure());
  const json counted =
      run_in(python->ref(), {"/bin/sh", "-c", "nproc; python3 -c 'import os; print(len(os.sched_getaffinity(0)))'"},
             {{"limits", {{"wall_time", "2m"}, {"cpus", 1}}}});
  ASSERT_EQ(counted.value("state", ""), "succeeded") << describe(counted);
  EXPECT_EQ(logs(counted, "stdout"), "1\n1\n");
}

// tests.cases from Surefire's XML: a passing, a failing and a disabled JUnit 5 test, each with its class, name and
// outcome.
TEST_F(CapsuledRecipes, TestCasesFromRealSurefireReports) {
  const Recipe* jdk = jdk_recipe("17");
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  const fs::path workspace = make_dir("cases-project");
  write_maven_project(workspace, {{"src/main/java/demo/Sign.java", kSign},
                                  {"src/test/java/demo/SignTest.java", R"(package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

class SignTest {
  @Test void passes() { assertEquals("positive", Sign.of(3)); }
  @Test void fails() { assertEquals("zero", Sign.of(0)); }
  @Disabled("not yet") @Test void skipped() { assertEquals("zero", Sign.of(0)); }
}
)"}});
  const json run = run_on_copy(jdk->ref(), workspace, "mvn -B -o clean verify",
                               {{"junit", {"target/surefire-reports/*.xml"}}});
  ASSERT_EQ(run.value("state", ""), "failed") << describe(run);
  const json& tests = run["tests"];
  EXPECT_EQ(tests["state"], "reports") << tests;
  EXPECT_EQ(tests["compile_error"], false) << tests;
  EXPECT_EQ(tests["files"], json::array({"target/surefire-reports/TEST-demo.SignTest.xml"})) << tests;
  EXPECT_EQ(tests["total"], 3) << tests;
  EXPECT_EQ(tests["failed"], 1) << tests;
  EXPECT_EQ(tests["errors"], 0) << tests;
  EXPECT_EQ(tests["skipped"], 1) << tests;
  EXPECT_EQ(tests["cases_truncated"], false) << tests;
  ASSERT_EQ(tests["cases"].size(), 3u) << tests;
  std::map<std::string, json> by_name;  // JUnit 5 runs methods in an order of its own
  for (const json& test_case : tests["cases"]) by_name[test_case.value("name", "")] = test_case;
  ASSERT_EQ(by_name.size(), 3u) << tests;
  for (const auto& [name, outcome] : std::map<std::string, std::string>{
           {"passes", "passed"}, {"fails", "failed"}, {"skipped", "skipped"}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(by_name.count(name)) << tests;
    const json& test_case = by_name[name];
    EXPECT_EQ(test_case["class"], "demo.SignTest");
    EXPECT_EQ(test_case["outcome"], outcome);
    EXPECT_TRUE(test_case["time"].is_number()) << test_case;
  }
  EXPECT_FALSE(by_name["passes"].contains("message")) << by_name["passes"];
  EXPECT_NE(by_name["fails"].value("message", "").find("expected: <zero> but was: <positive>"), std::string::npos)
      << by_name["fails"];
  EXPECT_EQ(by_name["skipped"].value("message", ""), "not yet") << by_name["skipped"];
}

// A main source that does not compile: no test ran, and the record says why.
TEST_F(CapsuledRecipes, AMavenCompileErrorIsNotNoTests) {
  const Recipe* jdk = jdk_recipe("17");
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  const fs::path workspace = make_dir("broken-project");
  write_maven_project(workspace,
                      {{"src/main/java/demo/Broken.java", "package demo;\npublic final class Broken { int x = }\n"},
                       {"src/test/java/demo/BrokenTest.java",
                        "package demo;\nclass BrokenTest { @org.junit.jupiter.api.Test void runs() {} }\n"}});
  const json run = run_on_copy(jdk->ref(), workspace, "mvn -B -o clean verify",
                               {{"junit", {"target/surefire-reports/*.xml"}}});
  ASSERT_EQ(run.value("state", ""), "failed") << describe(run);
  EXPECT_NE(logs(run, "stdout").find("COMPILATION ERROR"), std::string::npos) << logs(run, "stdout");
  EXPECT_EQ(run["tests"]["state"], "not_run") << run["tests"];
  EXPECT_EQ(run["tests"]["compile_error"], true) << run["tests"];
  EXPECT_EQ(run["tests"]["total"], 0) << run["tests"];
  EXPECT_EQ(run["tests"]["files"], json::array()) << run["tests"];
}

// A project without tests that builds (Java 17, plus one class javac compiles with --release 8 in the same
// command): tests.state none_found, and the class-file census names the odd one out.
TEST_F(CapsuledRecipes, AMavenBuildWithoutTestsCountsItsClassFileMajors) {
  const Recipe* jdk = jdk_recipe("17");
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  const fs::path workspace = make_dir("no-tests-project");
  write_maven_project(workspace, {{"src/main/java/demo/Sign.java", kSign},
                                  {"src/main/java/demo/Main.java",
                                   "package demo;\npublic final class Main {\n  public static void main(String[] args) "
                                   "{ System.out.println(Sign.of(1)); }\n}\n"},
                                  {"legacy/old/Legacy.java", "package old;\npublic class Legacy {}\n"}});
  const json run = run_on_copy(jdk->ref(), workspace,
                         "mvn -B -o clean verify && javac --release 8 -d target/classes legacy/old/Legacy.java",
                         {{"junit", {"target/surefire-reports/*.xml"}}, {"classfiles", {"target/**/*.class"}}});
  ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run);
  EXPECT_NE(logs(run, "stdout").find("No tests to run."), std::string::npos) << logs(run, "stdout");
  EXPECT_EQ(run["tests"]["state"], "none_found") << run["tests"];
  EXPECT_EQ(run["tests"]["compile_error"], false) << run["tests"];
  EXPECT_EQ(run["tests"]["total"], 0) << run["tests"];
  const json& census = run["classfiles"];
  ASSERT_TRUE(census.is_object()) << run.dump();
  EXPECT_EQ(census["majors"], json({{"52", 1}, {"61", 2}})) << census;
  EXPECT_EQ(census["expected"], 61) << census;
  EXPECT_EQ(census["odd"], json::array({{{"path", "target/classes/old/Legacy.class"}, {"major", 52}}})) << census;
  EXPECT_EQ(census["files"], 3) << census;
  EXPECT_EQ(census["unreadable"], json::array()) << census;
  EXPECT_EQ(census["truncated"], false) << census;
}

// JaCoCo coverage from a real Maven build, in both JDK images. Debian packages no jacoco-maven-plugin, so the
// images have Debian's JaCoCo (trixie's 0.8.12) as the runtime agent for surefire's argLine and the Ant tasks run
// by maven-antrun-plugin for the XML report (images/recipes/README.md); the record's summary equals the report's
// own LINE and BRANCH counters. In jdk21-maven the exec file is complete only with the recipe's blocking surefire
// stdin feeder: without it the fork was halted while the agent wrote (0-119 bytes, no covered line).
TEST_F(CapsuledRecipes, JacocoCoverageFromARealMavenBuild) {
  for (const char* major : {"17", "21"}) {
    if (jdk_recipe(major) == nullptr) {
      GTEST_SKIP() << "no jdk" << major << "-maven output in " << recipe_root() << "; " << kHowToBuild;
    }
  }
  // Each image's packaged JUnit 5 (bookworm's 5.9.2, trixie's 5.10.2), classes compiled for its own JDK.
  const auto expect_coverage = [this](const Recipe& jdk, const std::string& major, const std::string& junit) {
    ensure_image(jdk);
    ASSERT_FALSE(HasFailure());
    const fs::path workspace = make_dir("coverage-project-" + major);
    write_maven_project(workspace,
                        {{"src/main/java/demo/Sign.java", kSign},
                         {"src/test/java/demo/SignTest.java", R"(package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class SignTest {
  @Test void positive() { assertEquals("positive", Sign.of(3)); }
}
)"}},
                        R"(
    <plugins>
      <plugin>
        <artifactId>maven-surefire-plugin</artifactId>
        <configuration>
          <argLine>-javaagent:/usr/local/share/jacoco/jacocoagent.jar=destfile=target/jacoco.exec</argLine>
        </configuration>
      </plugin>
      <plugin>
        <artifactId>maven-antrun-plugin</artifactId>
        <version>3.1.0</version>
        <dependencies>
          <dependency>
            <groupId>org.jacoco</groupId>
            <artifactId>org.jacoco.ant</artifactId>
            <version>0.8.12</version>
          </dependency>
        </dependencies>
        <executions>
          <execution>
            <id>jacoco-report</id>
            <phase>verify</phase>
            <goals><goal>run</goal></goals>
            <configuration>
              <target>
                <taskdef resource="org/jacoco/ant/antlib.xml" classpathref="maven.plugin.classpath"/>
                <report>
                  <executiondata><file file="${project.build.directory}/jacoco.exec"/></executiondata>
                  <structure name="evidence">
                    <classfiles><fileset dir="${project.build.outputDirectory}"/></classfiles>
                    <sourcefiles><fileset dir="${project.build.sourceDirectory}"/></sourcefiles>
                  </structure>
                  <xml destfile="${project.build.directory}/jacoco.xml"/>
                </report>
              </target>
            </configuration>
          </execution>
        </executions>
      </plugin>
    </plugins>
  )", junit, major);
    // The report-level counters are the XML's last LINE and BRANCH counters.
    const json run = run_on_copy(jdk.ref(), workspace,
                           "mvn -B -o clean verify && for type in LINE BRANCH; do "
                           "grep -o \"<counter type=\\\"$type\\\"[^>]*>\" target/jacoco.xml | tail -n1; done",
                           {{"junit", {"target/surefire-reports/*.xml"}}, {"coverage", {"target/jacoco.xml"}}});
    const std::string out = logs(run, "stdout");
    ASSERT_EQ(run.value("state", ""), "succeeded") << describe(run) << "\n--- stdout:\n" << out;
    const std::regex counter("<counter type=\"(LINE|BRANCH)\" missed=\"([0-9]+)\" covered=\"([0-9]+)\"/>");
    json from_xml = json::object();
    for (const std::string& line : lines_of(strip_ansi(out))) {  // Maven ends with a colour reset
      std::smatch match;
      if (!std::regex_match(line, match, counter)) continue;
      const int missed = std::stoi(match[2]), covered = std::stoi(match[3]);
      from_xml[match[1] == "LINE" ? "lines" : "branches"] = {{"covered", covered}, {"total", missed + covered}};
    }
    // Sign.of: `if` and `return "positive"` ran, `return "negative"` did not; one of the if's two branches taken
    // (JaCoCo leaves the private constructor out).
    EXPECT_EQ(from_xml, json({{"lines", {{"covered", 2}, {"total", 3}}}, {"branches", {{"covered", 1}, {"total", 2}}}}))
        << out;
    const json& coverage = run["coverage"];
    ASSERT_TRUE(coverage.is_object()) << run.dump();
    ASSERT_EQ(coverage["reports"].size(), 1u) << coverage;
    EXPECT_EQ(coverage["reports"][0]["path"], "target/jacoco.xml") << coverage;
    EXPECT_EQ(coverage["reports"][0]["format"], "jacoco") << coverage;
    EXPECT_EQ(coverage["reports"][0]["lines"], from_xml["lines"]) << coverage;
    EXPECT_EQ(coverage["reports"][0]["branches"], from_xml["branches"]) << coverage;
    EXPECT_EQ(coverage["total"], from_xml) << coverage;
    EXPECT_EQ(coverage["unreadable"], json::array()) << coverage;
    EXPECT_EQ(run["tests"]["total"], 1) << run["tests"];
  };
  for (const auto& [major, junit] : {std::pair{"17", "5.9.2"}, std::pair{"21", "5.10.2"}}) {
    SCOPED_TRACE(std::string("jdk") + major + "-maven");
    expect_coverage(*jdk_recipe(major), major, junit);
  }
}

// A java that ignores SIGTERM (started with TERM ignored, which the JVM keeps) outlives the wall time and its
// grace: the record says KILL ended it, after TERM, because of the wall time.
TEST_F(CapsuledRecipes, AJavaIgnoringSigtermIsKilledAndTheRecordSaysSo) {
  const Recipe* jdk = jdk_recipe("17");
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  const fs::path workspace = make_dir("stubborn");
  write_file(workspace / "Stubborn.java",
             "public class Stubborn {\n  public static void main(String[] args) throws Exception {\n"
             "    System.out.println(\"waiting\");\n    Thread.sleep(600_000);\n  }\n}\n");
  const json run = run_in(jdk->ref(), {"/bin/sh", "-c", "trap '' TERM; exec java Stubborn.java"},
                          {{"workspace", {{"path", workspace.string()}, {"mode", "cow"}}},
                           {"limits", {{"wall_time", "2s"}, {"kill_grace", "1s"}}},
                           {"network", "none"}});
  EXPECT_EQ(run.value("state", ""), "timed_out") << describe(run);
  const json& result = run["result"];
  EXPECT_EQ(result["signal"], 9) << result;
  const json& termination = result["termination"];
  EXPECT_EQ(termination["reason"], "wall_time") << termination;
  EXPECT_EQ(termination["sent"], json({"TERM", "KILL"})) << termination;
  EXPECT_GE(termination["kill_after_ms"].get<double>(), 1000) << termination;
  EXPECT_EQ(run["spec"]["limits"]["wall_time"], 2000);
  EXPECT_EQ(run["spec"]["limits"]["kill_grace"], 1000);
}

// Two test classes of two cases each for write_maven_project; `surefire` is the maven-surefire-plugin's
// <configuration> (empty: the plugin is not declared).
void write_excludable_project(const fs::path& root, const std::string& surefire) {
  std::string plugin;
  if (!surefire.empty()) {
    plugin = R"(
    <plugins><plugin>
      <groupId>org.apache.maven.plugins</groupId>
      <artifactId>maven-surefire-plugin</artifactId>
      <configuration>)";
    plugin += surefire;
    plugin += "</configuration>\n    </plugin></plugins>";
  }
  std::map<std::string, std::string> files;
  for (const std::string name : {"FastTest", "SlowTest"}) {
    std::string source = "package demo;\n\nimport static org.junit.jupiter.api.Assertions.assertEquals;\n\n"
                         "import org.junit.jupiter.api.Test;\n\nclass ";
    source += name;
    source += " {\n  @Test void one() { assertEquals(2, 1 + 1); }\n  @Test void two() { assertEquals(4, 2 * 2); }\n}\n";
    std::string path = "src/test/java/demo/";
    path += name;
    files[path + ".java"] = std::move(source);
  }
  write_maven_project(root, files, plugin);
}

// Verdicts that a lost test fails: run B's pom gains a surefire <exclude>, so it runs 2 of 4 tests and passes; its
// baseline check lists the loss (allowed there) and `runs diff` fails it (passes with --allow-removed); a pom edit adding
// <skipTests> is listed in test_config_changes and, with protect_test_config, fails the run.
TEST_F(CapsuledRecipes, ASurefireExcludeFailsTheVerdictUnlessRemovalsAreAllowed) {
  const Recipe* jdk = jdk_recipe("17");
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  const json collect = {{"junit", {"target/surefire-reports/*.xml"}}};
  const fs::path before = make_dir("all-tests");
  write_excludable_project(before, "");
  const json a = run_on_copy(jdk->ref(), before, "mvn -B -o -q test", collect);
  ASSERT_EQ(a.value("state", ""), "succeeded") << describe(a);
  ASSERT_EQ(a["tests"]["total"], 4) << a["tests"];
  const std::string a_id = a["id"];

  // B: the same project whose pom excludes SlowTest, with A as its baseline whose removals are allowed: listed, and
  // B's own verdict stays passed, so the comparison below is about the lost tests alone.
  const fs::path after = make_dir("excluded");
  write_excludable_project(after, "<excludes><exclude>**/SlowTest.java</exclude></excludes>");
  const json b = run_in(jdk->ref(), {"/bin/sh", "-c", "mvn -B -o -q test"},
                        {{"workspace", {{"path", after.string()}, {"mode", "cow"}}},
                         {"collect", collect},
                         {"limits", {{"wall_time", "10m"}, {"memory", "2g"}}},
                         {"baseline", {{"run", a_id}, {"allow_removed", true}}}});
  ASSERT_EQ(b.value("state", ""), "succeeded") << describe(b);
  EXPECT_EQ(b["tests"]["total"], 2) << b["tests"];
  EXPECT_EQ(b["baseline"]["verdict"], "passed") << b["baseline"];
  EXPECT_EQ(b["baseline"]["allowed"], json({"tests_removed"})) << b["baseline"];
  EXPECT_EQ(b["baseline"]["removed"]["count"], 2) << b["baseline"];
  EXPECT_EQ(b["baseline"]["removed"]["cases"],
            json::parse(R"([{"name": "demo.SlowTest.one", "outcome": "passed"},
                            {"name": "demo.SlowTest.two", "outcome": "passed"}])")) << b["baseline"];

  const json diff = body_json(call("GET", "/v1/runs/diff?a=" + a_id + "&b=" + b["id"].get<std::string>()));
  EXPECT_EQ(diff["check"]["verdict"], "regressed") << diff["check"];
  EXPECT_EQ(diff["tests"]["removed_count"], 2) << diff["tests"];
  const Cli regressed = run_capsule_cli(dir_, {"--socket", socket_, "runs", "diff", a_id, b["id"]});
  EXPECT_EQ(regressed.code, 1) << regressed.out << regressed.err;
  EXPECT_NE(regressed.out.find("verdict: REGRESSED (tests_removed): 2 removed, 0 newly skipped"), std::string::npos)
      << regressed.out;
  const Cli allowed = run_capsule_cli(dir_, {"--socket", socket_, "runs", "diff", a_id, b["id"], "--allow-removed"});
  EXPECT_EQ(allowed.code, 0) << allowed.out << allowed.err;

  // The pom edit itself, made by the run on A's project: the record names it even when allowed, and
  // protect_test_config fails the run.
  const std::string edit = "sed -i 's#<build></build>#<build><plugins><plugin><artifactId>maven-surefire-plugin"
                           "</artifactId><configuration><skipTests>true</skipTests></configuration></plugin>"
                           "</plugins></build>#' pom.xml && grep -q skipTests pom.xml";
  const json edited = run_on_copy(jdk->ref(), before, "cd /workspace && " + edit, json::object());
  ASSERT_EQ(edited.value("state", ""), "succeeded") << describe(edited);
  ASSERT_EQ(edited["test_config_changes"].size(), 1u) << edited["test_config_changes"];
  EXPECT_EQ(edited["test_config_changes"][0]["kind"], "maven_tests");
  EXPECT_EQ(edited["test_config_changes"][0]["detail"],
            "build/plugins/plugin[maven-surefire-plugin]/configuration/skipTests: (none) -> true");
  EXPECT_FALSE(edited.contains("protect_violations")) << "not asked for";
  const json protected_run = run_in(jdk->ref(), {"/bin/sh", "-c", "cd /workspace && " + edit},
                                    {{"workspace", {{"path", before.string()}, {"mode", "cow"}}},
                                     {"protect_test_config", true}});
  ASSERT_EQ(protected_run.value("state", ""), "succeeded") << describe(protected_run);
  ASSERT_EQ(protected_run["protect_violations"].size(), 1u) << protected_run;
  EXPECT_EQ(protected_run["protect_violations"][0]["path"], "pom.xml");
}

}  // namespace
}  // namespace capsule::testing

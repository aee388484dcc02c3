// Maven resource copying from snapshot workspaces in the jdk17-maven and jdk21-maven images (issue 35): a snapshot
// tree of mtime 0 made maven-filtering skip every resource and fail with NoSuchFileException; and `capsule batch`.
#include <set>
#include <sstream>

#include "tests/e2e/recipes_fixture.h"

namespace capsule::testing {
namespace {

// A Maven project with main and test resources, each read by a JUnit 4 test through getResourceAsStream; Java 17
// sources, so both JDK images build it; `greeting` is what the main resource says.
void write_resource_project(const fs::path& root, const std::string& greeting) {
  fs::create_directories(root / "src/main/java/demo");
  fs::create_directories(root / "src/main/resources");
  fs::create_directories(root / "src/test/java/demo");
  fs::create_directories(root / "src/test/resources");
  write_file(root / "pom.xml", R"(<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId>
  <artifactId>snapshot-resources</artifactId>
  <version>1.0</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
    <maven.compiler.release>17</maven.compiler.release>
  </properties>
  <dependencies>
    <dependency>
      <groupId>junit</groupId>
      <artifactId>junit</artifactId>
      <version>4.13.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
</project>
)");
  write_file(root / "src/main/java/demo/Greeting.java", R"(package demo;

public final class Greeting {
  public static String text() throws java.io.IOException {
    java.util.Properties properties = new java.util.Properties();
    try (java.io.InputStream in = Greeting.class.getResourceAsStream("/greeting.properties")) { properties.load(in); }
    return properties.getProperty("greeting");
  }
}
)");
  write_file(root / "src/main/resources/greeting.properties", "greeting=" + greeting + "\n");
  write_file(root / "src/test/resources/expected.properties", "expected=" + greeting + "\n");
  write_file(root / "src/test/java/demo/GreetingTest.java", R"(package demo;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;

import org.junit.Test;

public class GreetingTest {
  @Test public void readsTheMainResource() throws Exception { assertNotNull(Greeting.text()); }

  @Test public void readsTheTestResource() throws Exception {
    java.util.Properties expected = new java.util.Properties();
    try (java.io.InputStream in = GreetingTest.class.getResourceAsStream("/expected.properties")) {
      assertNotNull("the test resource was copied", in);
      expected.load(in);
    }
    assertEquals(expected.getProperty("expected"), Greeting.text());
  }
}
)");
}

constexpr const char* kMavenOffline = "mvn -B -o clean verify";

TEST_F(CapsuledRecipes, MavenCopiesResourcesFromASnapshotWorkspaceInBothJdkImages) {
  std::vector<const Recipe*> jdks;
  for (const char* java : {"17", "21"}) {
    if (const Recipe* jdk = jdk_recipe(java)) jdks.push_back(jdk);
  }
  if (jdks.size() < 2) GTEST_SKIP() << "needs the jdk17-maven and jdk21-maven outputs in " << recipe_root() << "; " << kHowToBuild;
  const fs::path project = make_dir("resources-project");
  write_resource_project(project, "hello");
  const HttpResponse created = call("POST", "/v1/snapshots", {{"dir", project.string()}});
  ASSERT_EQ(created.status, 201) << created.body;
  const json snapshot = body_json(created);
  for (const Recipe* jdk : jdks) {
    ensure_image(*jdk);
    ASSERT_FALSE(HasFailure());
    const auto start = Clock::now();
    const json run = run_in(jdk->ref(), {"/bin/sh", "-c", kMavenOffline},
                            {{"workspace", {{"snapshot", snapshot["digest"]}}},
                             {"collect", {{"junit", {"target/surefire-reports/*.xml"}}}},
                             {"limits", {{"wall_time", "5m"}, {"memory", "2g"}}},
                             {"network", "none"}});
    note(jdk->name + ": " + kMavenOffline + " on snapshot " + snapshot.value("digest", "").substr(0, 19) + ": " +
         run.value("state", "?") + " in " + std::to_string(seconds_since(start)) + " s");
    const std::string out = logs(run, "stdout");
    EXPECT_EQ(out.find("NoSuchFileException"), std::string::npos) << jdk->name << ":\n" << out;
    ASSERT_EQ(run.value("state", ""), "succeeded") << jdk->name << ": " << describe(run) << "\n--- stdout:\n" << out;
    EXPECT_EQ(run["pinned"]["workspace_digest"], snapshot["digest"]);
    ASSERT_TRUE(run.contains("tests")) << run.dump();
    EXPECT_EQ(run["tests"]["total"], 2) << jdk->name << ": " << run["tests"].dump();
    EXPECT_EQ(run["tests"]["failed"], 0) << run["tests"].dump();
    EXPECT_EQ(run["tests"]["errors"], 0) << run["tests"].dump();
    std::set<std::string> added;
    for (const auto& entry : run["diff"]["added"]) added.insert(entry.value("path", ""));
    EXPECT_TRUE(added.count("target/classes/greeting.properties")) << run["diff"].dump();
    EXPECT_TRUE(added.count("target/test-classes/expected.properties")) << run["diff"].dump();
  }
}

// `capsule batch submit` of two projects on copy-on-write workspaces (pinned as snapshots at submit, the path
// every batch takes) passes as the same projects do on their host directories; a second submission finds each
// snapshot again ("reused") instead of making it.
TEST_F(CapsuledRecipes, ABatchOfMavenProjectsOnSnapshotsPassesAsOnHostDirectories) {
  const Recipe* jdk = jdk_recipe("17");  // maven-filtering 3.3.0: the image whose resource copying saw mtime 0
  if (jdk == nullptr) GTEST_SKIP() << "no jdk17-maven output in " << recipe_root() << "; " << kHowToBuild;
  ensure_image(*jdk);
  ASSERT_FALSE(HasFailure());
  std::string lines;
  std::vector<fs::path> projects;
  for (const char* name : {"alpha", "beta"}) {
    projects.push_back(make_dir(std::string("batch-") + name));
    write_resource_project(projects.back(), name);
    const json spec = {{"key", name},
                       {"image", jdk->ref()},
                       {"argv", {"/bin/sh", "-c", kMavenOffline}},
                       {"workspace", {{"path", projects.back().string()}, {"mode", "cow"}}},
                       {"limits", {{"wall_time", "5m"}, {"memory", "2g"}}},
                       {"network", "none"}};
    lines += spec.dump() + "\n";
  }
  // The host-directory baseline: one of them, straight (the others are the same build).
  const json native = run_in(jdk->ref(), {"/bin/sh", "-c", kMavenOffline},
                             {{"workspace", {{"path", projects[0].string()}, {"mode", "cow"}}},
                              {"limits", {{"wall_time", "5m"}, {"memory", "2g"}}},
                              {"network", "none"}});
  ASSERT_EQ(native.value("state", ""), "succeeded") << describe(native);

  const fs::path specs = dir_ / "maven.jsonl";
  write_file(specs, lines);
  const std::vector<std::string> env = {"CAPSULE_BATCH_ROOT=" + (dir_ / "batches").string()};
  auto capsule = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    return run_capsule_cli(dir_, args, env);
  };
  const auto start = Clock::now();
  const Cli submitted = capsule({"batch", "submit", specs.string(), "--concurrency", "2"});
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  for (const fs::path& project : projects) {
    EXPECT_NE(submitted.err.find(project.string() + ": made sha256:"), std::string::npos) << submitted.err;
  }
  EXPECT_NE(submitted.err.find("snapshot 2/2 "), std::string::npos) << submitted.err;
  const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  const Cli waited = capsule({"batch", "wait", id});
  note("capsule batch of 2 Maven projects on snapshots: " + std::to_string(seconds_since(start)) + " s");
  const Cli results = capsule({"batch", "results", id});
  ASSERT_EQ(results.code, 0) << results.err;
  std::istringstream in(results.out);
  std::size_t passed = 0;
  for (std::string line; std::getline(in, line);) {
    const json result = json::parse(line, nullptr, false);
    EXPECT_EQ(result.value("state", ""), native.value("state", "")) << line;
    passed += result.value("state", "") == "succeeded";
  }
  EXPECT_EQ(passed, 2u) << results.out << "\n" << waited.out << waited.err;

  // Resubmitted unchanged: every snapshot found by its tree's stat data (the trees were written before the native
  // build, longer ago than the racy window), and the runs served from the batch's manifest cache.
  const Cli again = capsule({"batch", "submit", specs.string(), "--concurrency", "2"});
  ASSERT_EQ(again.code, 0) << again.err;
  for (const fs::path& project : projects) {
    EXPECT_NE(again.err.find(project.string() + ": reused sha256:"), std::string::npos) << again.err;
  }
  EXPECT_EQ(capsule({"batch", "wait", again.out.substr(0, again.out.find('\n'))}).code, 0);
}

}  // namespace
}  // namespace capsule::testing

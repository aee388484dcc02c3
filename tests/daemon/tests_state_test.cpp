// tests.state and tests.compile_error: reports read, none found after a success, none after a failure (a build
// that broke before its tests), and the compile-failure markers of Maven and javac.
#include "daemon/record/tests_state.h"

#include <gtest/gtest.h>

namespace capsule::daemon {
namespace {

TEST(TestsState, FromReportsAndHowTheCommandEnded) {
  TestCounts none;
  EXPECT_EQ(tests_state(none, true), "none_found");
  EXPECT_EQ(tests_state(none, false), "not_run");
  TestCounts broken;
  broken.unreadable = {"TEST-a.xml: malformed XML"};
  broken.reports_not_read = 1;
  EXPECT_EQ(tests_state(broken, false), "unreadable");
  TestCounts search_problem;  // a directory the search could not enter matched no report
  search_problem.unreadable = {"build: opendir: Permission denied"};
  search_problem.not_read = 3;
  EXPECT_EQ(tests_state(search_problem, true), "none_found");
  EXPECT_EQ(tests_state(search_problem, false), "not_run");
  TestCounts read;
  read.files = {"TEST-a.xml"};
  read.unreadable = {"TEST-b.xml: malformed XML"};
  EXPECT_EQ(tests_state(read, false), "reports") << "failing tests still ran";
}

TEST(TestsState, CompileErrorsOfMavenAndJavac) {
  EXPECT_TRUE(shows_compile_error("[INFO] ---\n[ERROR] COMPILATION ERROR : \n[INFO] ---\n"));
  EXPECT_TRUE(shows_compile_error(
      "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.10.1:compile (default-compile) "
      "on project demo: Compilation failure\n"));
  EXPECT_TRUE(shows_compile_error("src/Main.java:3: error: ';' expected\n"));
  EXPECT_FALSE(shows_compile_error("Tests run: 3, Failures: 1, Errors: 0, Skipped: 0\n[ERROR] Failures:\n"));
  EXPECT_FALSE(shows_compile_error("notes.java: error: nothing"));
  EXPECT_FALSE(shows_compile_error("E   AssertionError: 1 == 2\n"));
  EXPECT_FALSE(shows_compile_error(""));
}

}  // namespace
}  // namespace capsule::daemon

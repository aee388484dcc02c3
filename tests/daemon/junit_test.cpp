// JUnit counting and cases: Maven Surefire and pytest reports as those tools write them, suites without count
// attributes, nested suites, malformed files, and the report globs (*, ?, **) over a workspace tree.
#include "daemon/record/junit.h"
#include "tests/support/scratch_dir_test.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;

const char* kSurefireReport = R"(<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/surefire-test-report-3.0.xsd" version="3.0" name="com.example.CalculatorTest" time="0.042" tests="4" errors="0" skipped="1" failures="1">
  <properties>
    <property name="java.version" value="17.0.9"/>
    <property name="maven.repo.local" value="/root/.m2/repository"/>
  </properties>
  <testcase name="addsNumbers" classname="com.example.CalculatorTest" time="0.003"/>
  <testcase name="dividesByZero" classname="com.example.CalculatorTest" time="0.011">
    <failure message="expected: &lt;1&gt; but was: &lt;2&gt;" type="org.opentest4j.AssertionFailedError"><![CDATA[org.opentest4j.AssertionFailedError: expected: <1> but was: <2>
	at com.example.CalculatorTest.dividesByZero(CalculatorTest.java:21)
]]></failure>
    <system-out><![CDATA[dividing...
]]></system-out>
  </testcase>
  <testcase name="subtractsLater" classname="com.example.CalculatorTest" time="0">
    <skipped message="not implemented yet"/>
  </testcase>
  <testcase name="multiplies" classname="com.example.CalculatorTest" time="0.001"/>
</testsuite>
)";

const char* kSurefireSmall = R"(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.example.OtherTest" time="0.01" tests="2" errors="1" skipped="0" failures="0">
  <testcase name="a" classname="com.example.OtherTest" time="0.001"/>
  <testcase name="b" classname="com.example.OtherTest" time="0.002">
    <error message="boom" type="java.lang.IllegalStateException">java.lang.IllegalStateException: boom</error>
  </testcase>
</testsuite>
)";

const char* kPytestReport = R"(<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1" skipped="2" tests="6" time="0.123" timestamp="2024-03-01T12:00:00.000000" hostname="ci"><testcase classname="tests.test_app" name="test_ok" time="0.001" /><testcase classname="tests.test_app" name="test_fails" time="0.002"><failure message="assert 1 == 2">def test_fails():
&gt;       assert 1 == 2
E       assert 1 == 2

tests/test_app.py:5: AssertionError</failure></testcase><testcase classname="tests.test_app" name="test_skip" time="0.000"><skipped type="pytest.skip" message="no network">tests/test_app.py:8: no network</skipped></testcase><testcase classname="tests.test_app" name="test_xfail" time="0.001"><skipped type="pytest.xfail" message="known bug" /></testcase><testcase classname="tests.test_app" name="test_db" time="0.000"><error message="failed on setup with &quot;RuntimeError: no database&quot;">@pytest.fixture
    def db():
&gt;       raise RuntimeError("no database")
E       RuntimeError: no database

tests/conftest.py:4: RuntimeError</error></testcase><testcase classname="tests.test_app" name="test_ok_too" time="0.001" /></testsuite></testsuites>)";

class JunitTest : public testing::ScratchDirTest {};

TEST_F(JunitTest, SurefireReport) {
  const std::string path = write("TEST-com.example.CalculatorTest.xml", kSurefireReport);
  const TestCounts counts = parse_junit_file(path);
  EXPECT_EQ(counts.total, 4u);
  EXPECT_EQ(counts.failed, 1u);
  EXPECT_EQ(counts.errors, 0u);
  EXPECT_EQ(counts.skipped, 1u);
  EXPECT_EQ(counts.files, std::vector<std::string>{path});
}

TEST_F(JunitTest, SurefireCasesAreListedWithOutcomeTimeAndMessage) {
  const TestCounts counts = parse_junit_file(write("TEST-com.example.CalculatorTest.xml", kSurefireReport));
  ASSERT_EQ(counts.cases.size(), 4u);
  EXPECT_EQ(counts.cases[0].to_json(), nlohmann::json({{"class", "com.example.CalculatorTest"},
                                                       {"name", "addsNumbers"},
                                                       {"outcome", "passed"},
                                                       {"time", 0.003}}));
  EXPECT_EQ(counts.cases[1].outcome, "failed");
  EXPECT_EQ(counts.cases[1].message, "expected: <1> but was: <2>");
  EXPECT_EQ(counts.cases[2].outcome, "skipped");
  EXPECT_EQ(counts.cases[2].message, "not implemented yet");
  EXPECT_EQ(counts.cases[2].time, 0.0);
  EXPECT_FALSE(counts.cases_truncated);
}

TEST_F(JunitTest, PytestCasesIncludeErrorsAndNestedSuites) {
  const TestCounts counts = parse_junit_file(write("junit.xml", kPytestReport));
  ASSERT_EQ(counts.cases.size(), 6u);
  EXPECT_EQ(counts.cases[4].class_name, "tests.test_app");
  EXPECT_EQ(counts.cases[4].name, "test_db");
  EXPECT_EQ(counts.cases[4].outcome, "error");
  EXPECT_EQ(counts.cases[4].message, "failed on setup with \"RuntimeError: no database\"");
  EXPECT_EQ(counts.cases[5].outcome, "passed");
}

TEST_F(JunitTest, CasesAndMessagesAreBounded) {
  std::string report = "<testsuite>";
  for (int i = 0; i < 30; ++i) {
    report += "<testcase classname=\"C\" name=\"t" + std::to_string(i) + "\" time=\"1,234.5\"><failure>" +
              std::string(100, 'm') + "\xC3\xA9</failure></testcase>";
  }
  report += "<testcase classname=\"C\" name=\"bad-time\" time=\"soon\"/></testsuite>";
  write("a/TEST-a.xml", report);
  write("b/TEST-b.xml", report);
  JunitLimits limits;
  limits.max_cases = 40;
  limits.max_message_bytes = 101;
  const TestCounts counts = collect_junit(dir_, {"*/TEST-*.xml"}, limits);
  EXPECT_EQ(counts.total, 62u) << "counts are never cut";
  ASSERT_EQ(counts.cases.size(), 40u);
  EXPECT_TRUE(counts.cases_truncated);
  EXPECT_EQ(counts.cases[0].time, 1234.5);
  EXPECT_EQ(counts.cases[0].message, std::string(100, 'm')) << "never half a character";
  EXPECT_EQ(counts.cases[30].name, "bad-time");
  EXPECT_FALSE(counts.cases[30].time.has_value());
  EXPECT_TRUE(counts.cases[30].to_json()["time"].is_null());
  EXPECT_EQ(counts.cases[31].name, "t0") << "the second report's cases follow the first's";
}

TEST_F(JunitTest, PytestReportWithSkippedFailedAndError) {
  const TestCounts counts = parse_junit_file(write("junit.xml", kPytestReport));
  EXPECT_EQ(counts.total, 6u);
  EXPECT_EQ(counts.failed, 1u);
  EXPECT_EQ(counts.errors, 1u);
  EXPECT_EQ(counts.skipped, 2u);
}

TEST_F(JunitTest, CountsTestcasesWhenSuitesHaveNoCounts) {
  // The same pytest report with every count attribute removed.
  const std::string bare = std::regex_replace(
      std::string(kPytestReport), std::regex(R"( (errors|failures|skipped|tests)="\d+")"), "");
  ASSERT_EQ(bare.find("tests=\""), std::string::npos);
  const TestCounts counts = parse_junit_file(write("bare.xml", bare));
  EXPECT_EQ(counts.total, 6u);
  EXPECT_EQ(counts.failed, 1u);
  EXPECT_EQ(counts.errors, 1u);
  EXPECT_EQ(counts.skipped, 2u);
}

TEST_F(JunitTest, NestedSuitesAreNotCountedTwice) {
  // Totals on <testsuites> are ignored; a suite with counts is trusted and its children not re-counted.
  const TestCounts with_counts = parse_junit_file(write("nested.xml", R"(<testsuites tests="99" failures="99">
  <testsuite name="outer" tests="3" failures="1" errors="0" skipped="0">
    <testsuite name="inner" tests="3" failures="1">
      <testcase name="a"/><testcase name="b"><failure/></testcase><testcase name="c"/>
    </testsuite>
  </testsuite>
</testsuites>)"));
  EXPECT_EQ(with_counts.total, 3u);
  EXPECT_EQ(with_counts.failed, 1u);

  // An outer suite without counts: its own testcases plus its inner suites.
  const TestCounts mixed = parse_junit_file(write("mixed.xml", R"(<testsuite name="outer">
  <testcase name="direct"><skipped/></testcase>
  <testsuite name="inner" tests="2" errors="1"/>
  <testsuite name="bare"><testcase name="x"><error/></testcase><testcase name="y"/></testsuite>
</testsuite>)"));
  EXPECT_EQ(mixed.total, 5u);
  EXPECT_EQ(mixed.errors, 2u);
  EXPECT_EQ(mixed.skipped, 1u);
}

TEST_F(JunitTest, MalformedAndForeignFilesThrowWithPath) {
  const std::string broken = write("broken.xml", "<testsuite tests=\"1\"><testcase name=\"a\">");
  try {
    parse_junit_file(broken);
    FAIL();
  } catch (const JunitError& e) {
    EXPECT_EQ(e.cause().path, broken);
    EXPECT_NE(std::string(e.what()).find(broken + ": malformed XML: "), std::string::npos) << e.what();
  }
  try {
    parse_junit_file(write("pom.xml", "<project><modelVersion>4.0.0</modelVersion></project>"));
    FAIL();
  } catch (const JunitError& e) {
    EXPECT_EQ(e.cause().detail, "not a JUnit report (root element <project>)");
  }
  EXPECT_THROW(parse_junit_file(write("bad-count.xml", R"(<testsuite tests="-1"/>)")), JunitError);
  try {
    parse_junit_file(dir_ + "/absent.xml");
    FAIL();
  } catch (const JunitError& e) {
    EXPECT_NE(e.cause().detail.find("No such file"), std::string::npos) << e.what();
  }
}

std::string nested_suites(std::size_t depth) {
  std::string text;
  for (std::size_t i = 0; i < depth; ++i) text += "<testsuite>";
  text += "<testcase name=\"deep\"/>";
  for (std::size_t i = 0; i < depth; ++i) text += "</testsuite>";
  return text;
}

TEST_F(JunitTest, DeeplyNestedReportIsUnreadableNotACrash) {
  // A sandbox can nest suites 200k deep in 2.4 MB; walking that by recursion overflows the thread's stack.
  try {
    parse_junit_file(write("deep.xml", nested_suites(200000)));
    FAIL();
  } catch (const JunitError& e) {
    EXPECT_NE(e.cause().detail.find("nested too deep"), std::string::npos) << e.what();
  }
  const TestCounts fine = parse_junit_file(write("fine.xml", nested_suites(60)));
  EXPECT_EQ(fine.total, 1u);
  ASSERT_EQ(fine.cases.size(), 1u);
  EXPECT_EQ(fine.cases[0].name, "deep");
}

// What a report holds is quoted in errors only in part, and a case's class and name are cut like its message.
TEST_F(JunitTest, HostileTextIsNotCopiedWhole) {
  const std::string huge(1 << 20, '7');
  try {
    parse_junit_file(write("count.xml", "<testsuite tests=\"x" + huge + "\"/>"));
    FAIL();
  } catch (const JunitError& e) {
    EXPECT_LT(e.cause().detail.size(), 200u) << e.cause().detail.substr(0, 300);
    EXPECT_NE(e.cause().detail.find("x777"), std::string::npos) << e.cause().detail.substr(0, 300);
  }
  const std::string name(1 << 20, 'n');
  try {
    parse_junit_file(write("root.xml", "<" + name + "/>"));
    FAIL();
  } catch (const JunitError& e) {
    EXPECT_LT(e.cause().detail.size(), 200u) << e.cause().detail.substr(0, 300);
  }
  const TestCounts counts = parse_junit_file(
      write("case.xml", "<testsuite><testcase classname=\"" + huge + "\" name=\"" + name + "\"/></testsuite>"));
  ASSERT_EQ(counts.cases.size(), 1u);
  EXPECT_EQ(counts.cases[0].class_name.size(), JunitLimits{}.max_message_bytes);
  EXPECT_EQ(counts.cases[0].name.size(), JunitLimits{}.max_message_bytes);
}

// Hard links make one big report many: every report opened counts against max_files and every byte read
// against max_total_bytes, whether it parses or not.
TEST_F(JunitTest, UnparsedReportsStillCostFilesAndBytes) {
  const std::string first = write("r/a.xml", std::string(1000, 'x'));  // not XML
  for (const char* name : {"r/b.xml", "r/c.xml", "r/d.xml"}) {
    ASSERT_EQ(::link(first.c_str(), (dir_ + "/" + name).c_str()), 0);
  }
  JunitLimits limits;
  limits.max_total_bytes = 2500;
  const TestCounts by_size = collect_junit(dir_, {"r/*.xml"}, limits);
  EXPECT_TRUE(by_size.truncated);
  const std::string listed = nlohmann::json(by_size.unreadable).dump();
  EXPECT_NE(listed.find("r/c.xml: not read: the reports would pass"), std::string::npos) << listed;
  limits = JunitLimits{};
  limits.max_files = 2;
  const TestCounts by_count = collect_junit(dir_, {"r/*.xml"}, limits);
  EXPECT_TRUE(by_count.truncated);
  const std::string counted = nlohmann::json(by_count.unreadable).dump();
  EXPECT_NE(counted.find("r/c.xml: not read: more than 2 reports"), std::string::npos) << counted;
}

TEST_F(JunitTest, CollectsOverGlobs) {
  write("target/surefire-reports/TEST-com.example.CalculatorTest.xml", kSurefireReport);
  write("target/surefire-reports/TEST-com.example.OtherTest.xml", kSurefireSmall);
  write("target/surefire-reports/com.example.CalculatorTest.txt", "not xml");
  write("module-a/target/surefire-reports/TEST-com.example.ModuleTest.xml", kSurefireSmall);
  write("reports/junit-py.xml", kPytestReport);
  write("reports/deep/er/junit-broken.xml", "<testsuites><testsuite");
  write(".hidden/junit-hidden.xml", kPytestReport);
  fs::create_symlink("reports/junit-py.xml", dir_ + "/junit-link.xml");  // symlinks are not followed

  // The first and last globs both match the root module's reports: counted once.
  const TestCounts counts = collect_junit(
      dir_, {"target/surefire-reports/TEST-*.xml", "**/junit*.xml", "**/surefire-reports/TEST-*.xml"});
  EXPECT_EQ(counts.files, (std::vector<std::string>{
                              "module-a/target/surefire-reports/TEST-com.example.ModuleTest.xml",
                              "reports/junit-py.xml",
                              "target/surefire-reports/TEST-com.example.CalculatorTest.xml",
                              "target/surefire-reports/TEST-com.example.OtherTest.xml",
                          }));
  EXPECT_EQ(counts.total, 4u + 2u + 2u + 6u);
  EXPECT_EQ(counts.failed, 1u + 1u);
  EXPECT_EQ(counts.errors, 1u + 1u + 1u);
  EXPECT_EQ(counts.skipped, 1u + 2u);
  ASSERT_EQ(counts.unreadable.size(), 1u);
  EXPECT_EQ(counts.unreadable[0].rfind("reports/deep/er/junit-broken.xml: malformed XML", 0), 0u)
      << counts.unreadable[0];

  const nlohmann::json j = counts.to_json();
  EXPECT_EQ(j["total"], 14);
  EXPECT_EQ(j["files"].size(), 4u);
  EXPECT_EQ(j["unreadable"].size(), 1u);

  EXPECT_EQ(collect_junit(dir_, {"nothing/*.xml"}).total, 0u);
}

TEST_F(JunitTest, GlobSyntax) {
  for (const char* rel : {"a/x1.xml", "a/x22.xml", "a/b/c/x3.xml", "a/.dot/x4.xml", "z.xml"}) write(rel, "");
  EXPECT_EQ(glob_files(dir_, {"a/x?.xml"}), (std::vector<std::string>{"a/x1.xml"}));
  EXPECT_EQ(glob_files(dir_, {"a/**"}), (std::vector<std::string>{"a/b/c/x3.xml", "a/x1.xml", "a/x22.xml"}));
  EXPECT_EQ(glob_files(dir_, {"**/**/x3.xml", "./a/b/**/x3.xml"}), (std::vector<std::string>{"a/b/c/x3.xml"}));
  EXPECT_EQ(glob_files(dir_, {"a/.dot/*.xml"}), (std::vector<std::string>{"a/.dot/x4.xml"}));  // explicit dot
  EXPECT_EQ(glob_files(dir_, {"*.xml"}), (std::vector<std::string>{"z.xml"}));
  EXPECT_EQ(glob_files(dir_, {"**/*.xml"}).size(), 4u);
  EXPECT_THROW(glob_files(dir_, {"/etc/*.xml"}), JunitError);
  EXPECT_THROW(glob_files(dir_, {"a/../../*.xml"}), JunitError);
  EXPECT_THROW(glob_files(dir_, {""}), JunitError);
  EXPECT_THROW(glob_files(dir_ + "/missing", {"*.xml"}), JunitError);
}

// Hostile "reports": a sparse file far past the per-report limit is skipped without being read, a FIFO is
// never opened, symlinks are not followed, and the count and total-size limits say what they left out.
TEST_F(JunitTest, CollectionIsBoundedAndSaysWhatItSkipped) {
  write("r/TEST-a.xml", kSurefireSmall);
  write("r/TEST-b.xml", kSurefireSmall);
  write("r/TEST-c.xml", kSurefireSmall);
  const std::string sparse = dir_ + "/r/TEST-sparse.xml";
  {
    std::ofstream(sparse) << "<testsuite tests=\"1000\"/>";
  }
  ASSERT_EQ(::truncate(sparse.c_str(), 63ll << 20), 0);
  ASSERT_EQ(::mkfifo((dir_ + "/r/TEST-fifo.xml").c_str(), 0644), 0);
  fs::create_symlink("/etc/passwd", dir_ + "/r/TEST-link.xml");

  const TestCounts counts = collect_junit(dir_, {"r/*.xml"});
  EXPECT_EQ(counts.files, (std::vector<std::string>{"r/TEST-a.xml", "r/TEST-b.xml", "r/TEST-c.xml"}));
  EXPECT_EQ(counts.total, 3u * 2u);
  ASSERT_EQ(counts.unreadable.size(), 1u) << nlohmann::json(counts.unreadable);
  EXPECT_EQ(counts.unreadable[0],
            "r/TEST-sparse.xml: report of 66060288 bytes is larger than the 16 MiB limit; not read");
  EXPECT_FALSE(counts.truncated);

  try {  // asked directly, a FIFO is refused without blocking
    parse_junit_file(dir_ + "/r/TEST-fifo.xml");
    FAIL();
  } catch (const JunitError& e) {
    EXPECT_EQ(e.cause().detail, "not a regular file");
  }

  JunitLimits limits;
  limits.max_files = 2;
  const TestCounts capped = collect_junit(dir_, {"r/*.xml"}, limits);
  EXPECT_EQ(capped.files.size(), 2u);
  EXPECT_TRUE(capped.truncated);
  EXPECT_EQ(capped.to_json()["truncated"], true);
  EXPECT_NE(nlohmann::json(capped.unreadable).dump().find("r/TEST-c.xml: not read: more than 2 reports"),
            std::string::npos)
      << nlohmann::json(capped.unreadable);

  limits = JunitLimits{};
  limits.max_total_bytes = fs::file_size(dir_ + "/r/TEST-a.xml") + 1;
  const TestCounts by_size = collect_junit(dir_, {"r/*.xml"}, limits);
  EXPECT_EQ(by_size.files, std::vector<std::string>{"r/TEST-a.xml"});
  EXPECT_TRUE(by_size.truncated);

  limits = JunitLimits{};
  limits.max_visited = 3;
  const TestCounts by_visits = collect_junit(dir_, {"**/*.xml"}, limits);
  EXPECT_TRUE(by_visits.truncated);
  EXPECT_NE(nlohmann::json(by_visits.unreadable).dump().find("search stopped here (too many directory entries)"),
            std::string::npos)
      << nlohmann::json(by_visits.unreadable);
}

// A directory chain past PATH_MAX is walked by descriptor (a report found there cannot be opened by its path:
// it is listed), and one deeper than the walker's bound is searched only to that bound: neither stops the
// counting of the reports elsewhere.
TEST_F(JunitTest, DeepTreeDoesNotStopCounting) {
  write("target/TEST-a.xml", kSurefireSmall);
  const auto chain = [&](const std::string& top, const std::string& name, int depth) {
    int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
    for (int level = 0; level < depth; ++level) {
      const std::string here = level == 0 ? top : name;
      ASSERT_EQ(::mkdirat(fd, here.c_str(), 0755), 0);
      const int next = ::openat(fd, here.c_str(), O_RDONLY | O_DIRECTORY);
      ::close(fd);
      fd = next;
    }
    const int report = ::openat(fd, "TEST-deep.xml", O_WRONLY | O_CREAT, 0644);
    ASSERT_EQ(::write(report, kSurefireSmall, std::strlen(kSurefireSmall)),
              static_cast<ssize_t>(std::strlen(kSurefireSmall)));
    ::close(report);
    ::close(fd);
  };
  chain("long", std::string(200, 'd'), 30);  // 6 KB of path
  chain("deep", "d", 200);
  const TestCounts counts = collect_junit(dir_, {"**/TEST-*.xml"});
  EXPECT_EQ(counts.files, std::vector<std::string>{"target/TEST-a.xml"});
  EXPECT_EQ(counts.total, 2u);
  const std::string listed = nlohmann::json(counts.unreadable).dump();
  EXPECT_NE(listed.find("/TEST-deep.xml: open: File name too long"), std::string::npos) << listed;
  EXPECT_NE(listed.find("not searched: more than 128 directories deep"), std::string::npos) << listed;
}

TEST(JunitCounts, AddAndJson) {
  TestCounts a;
  a.total = 3;
  a.failed = 1;
  a.files = {"one.xml"};
  TestCounts b;
  b.total = 2;
  b.errors = 1;
  b.skipped = 1;
  b.files = {"two.xml"};
  b.unreadable = {"bad.xml: malformed XML"};
  a += b;
  EXPECT_EQ(a.to_json(), nlohmann::json({{"total", 5},
                                         {"failed", 1},
                                         {"errors", 1},
                                         {"skipped", 1},
                                         {"cases", nlohmann::json::array()},
                                         {"cases_truncated", false},
                                         {"files", {"one.xml", "two.xml"}},
                                         {"unreadable", {"bad.xml: malformed XML"}}}));
}

}  // namespace
}  // namespace capsule::daemon

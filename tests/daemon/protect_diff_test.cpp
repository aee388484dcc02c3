// Protect globs against a cow workspace's diff: which changes a glob covers (below matching directories,
// absolute globs from the root), the violations listed and capped, and build_record failing closed.
#include "daemon/record/protect_diff.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "daemon/record/run_record.h"
#include "spec/limits.h"

namespace capsule::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ProtectDiff, GlobsCoverTheirMatchesAndWhatIsBelowAMatchingDirectory) {
  EXPECT_TRUE(protect_covers("conftest.py", "conftest.py"));
  EXPECT_FALSE(protect_covers("conftest.py", "src/conftest.py"));
  EXPECT_TRUE(protect_covers("**/conftest.py", "src/conftest.py"));
  EXPECT_TRUE(protect_covers("tests/**", "tests/test_x.py"));
  EXPECT_TRUE(protect_covers("tests/**", "tests/deep/er/test_y.py"));
  EXPECT_TRUE(protect_covers("tests", "tests/test_x.py")) << "a matching directory is protected whole";
  EXPECT_TRUE(protect_covers("tests/**", "tests/new_dir/")) << "an empty directory, listed with its slash";
  EXPECT_FALSE(protect_covers("tests/**", "testsuite/a.py"));
  EXPECT_FALSE(protect_covers("*.py", "src/a.py")) << "'*' stays within one name";
  EXPECT_TRUE(protect_covers("*.py", ".hidden.py")) << "dot files included";
  EXPECT_TRUE(protect_covers("/workspace/tests/**", "tests/test_x.py"));
  EXPECT_FALSE(protect_covers("/workspace/tests/**", "src/a.py"));
  EXPECT_TRUE(protect_covers("/workspace", "src/a.py"));
  EXPECT_TRUE(protect_covers("/**", "src/a.py"));
  EXPECT_FALSE(protect_covers("/etc/**", "etc/passwd")) << "an absolute glob is from the root, not the workspace";
}

WorkspaceDiff sample_diff() {
  WorkspaceDiff diff;
  diff.added = {{"conftest.py", 40}, {"src/new.py", 3}, {"tests/test_x.py", 10}};
  diff.modified = {{"src/a.py", 5}};
  diff.deleted = {{"tests/test_a.py", 12}};
  diff.total_added = 3;
  diff.total_modified = 1;
  diff.total_deleted = 1;
  return diff;
}

TEST(ProtectDiff, EachCoveredChangeIsOneViolationNamingItsGlob) {
  const json violations = protect_diff_violations({"conftest.py", "tests/**"}, sample_diff());
  EXPECT_EQ(violations, json::parse(R"([
    {"path": "conftest.py", "reason": "protect: added, matches 'conftest.py'"},
    {"path": "tests/test_x.py", "reason": "protect: added, matches 'tests/**'"},
    {"path": "tests/test_a.py", "reason": "protect: deleted, matches 'tests/**'"}])"));
  EXPECT_EQ(protect_diff_violations({"docs/**"}, sample_diff()), json::array());
}

TEST(ProtectDiff, TheListIsCappedWithOneSummaryEntry) {
  const json violations = protect_diff_violations({"**"}, sample_diff(), 2);
  ASSERT_EQ(violations.size(), 3u) << violations;
  EXPECT_EQ(violations[1]["path"], "src/new.py");
  EXPECT_EQ(violations[2], json({{"path", ""}, {"reason", "protect: 3 more changes of protected paths, not listed"}}));
}

TEST(ProtectDiff, AnIncompleteDiffFailsClosed) {
  WorkspaceDiff diff = sample_diff();
  diff.errors = {"tests/x: Permission denied"};
  diff.error_count = 1;
  const json violations = protect_diff_violations({"docs/**"}, diff);
  ASSERT_EQ(violations.size(), 1u) << violations;
  EXPECT_EQ(violations[0]["path"], "");
  EXPECT_EQ(violations[0]["reason"], "protect: the workspace diff was not complete (1 entries unreadable, listing "
                                     "whole): what it did not list cannot be checked");
}

class ProtectRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/capsule-protect-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    fs::create_directories(lower() + "/tests");
    fs::create_directories(upper());
    std::ofstream(lower() + "/tests/test_a.py") << "def test_a(): pass\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string lower() const { return dir_ + "/lower"; }
  std::string upper() const { return dir_ + "/upper"; }

  json record_of(const json& extra) {
    json body = {{"argv", {"true"}}, {"workspace", {{"path", lower()}, {"mode", "cow"}}}};
    body.update(extra);
    const spec::RunSpec spec = spec::parse_run_spec(body, spec::default_limit_policy());
    sandbox::Result result;
    result.status = sandbox::Status::kSucceeded;
    RecordSources sources;
    sources.upper_dir = upper();
    return build_record(spec, result, sources);
  }

  std::string dir_;
};

TEST_F(ProtectRecordTest, ACreatedMatchingFileIsAViolationAndOthersAreNot) {
  std::ofstream(upper() + "/conftest.py") << "collect_ignore_glob = ['*']\n";
  fs::create_directories(upper() + "/src");
  std::ofstream(upper() + "/src/new.py") << "x = 1\n";
  const json record = record_of({{"protect", {"tests/**", "conftest.py"}}});
  EXPECT_EQ(record["protect_violations"],
            json::parse(R"([{"path": "conftest.py", "reason": "protect: added, matches 'conftest.py'"}])"))
      << record.dump();
  EXPECT_EQ(record["diff"]["totals"]["added"], 2) << record.dump();

  fs::remove(upper() + "/conftest.py");
  EXPECT_EQ(record_of({{"protect", {"tests/**", "conftest.py"}}})["protect_violations"], json::array());
  EXPECT_FALSE(record_of(json::object()).contains("protect_violations")) << "not asked for";
}

TEST_F(ProtectRecordTest, ViolationsMergeWithProtectTestConfigs) {
  std::ofstream(upper() + "/conftest.py") << "collect_ignore_glob = ['*']\n";
  const json record = record_of({{"protect", {"conftest.py"}}, {"protect_test_config", true}});
  const json& violations = record["protect_violations"];
  ASSERT_EQ(violations.size(), 2u) << record.dump();
  EXPECT_EQ(violations[0]["reason"], "protect_test_config: pytest_conftest: added");
  EXPECT_EQ(violations[1]["reason"], "protect: added, matches 'conftest.py'");
}

TEST_F(ProtectRecordTest, AChangePastTheRecordsListingIsFoundByAWiderWalk) {
  fs::create_directories(upper() + "/target");
  for (int i = 0; i < 10001; ++i) std::ofstream(upper() + "/target/f" + std::to_string(i));
  fs::create_directories(upper() + "/tests");
  std::ofstream(upper() + "/tests/test_x.py") << "import pytest\n";
  const json record = record_of({{"protect", {"tests/**"}}});
  ASSERT_EQ(record["diff"]["truncated"], true) << "the record's own listing is cut";
  EXPECT_EQ(record["protect_violations"],
            json::parse(R"([{"path": "tests/test_x.py", "reason": "protect: added, matches 'tests/**'"}])"));
}

TEST_F(ProtectRecordTest, AnUnreadableDiffFailsClosed) {
  fs::remove_all(upper());
  std::ofstream(upper()) << "not a directory";  // exists, but cannot be opened as a diff root
  const json record = record_of({{"protect", {"tests/**"}}});
  ASSERT_EQ(record["protect_violations"].size(), 1u) << record.dump();
  EXPECT_EQ(record["protect_violations"][0]["reason"],
            "protect: the workspace diff could not be read, so files created under the protected globs could not "
            "be checked");
  EXPECT_NE(record.value("collect_error", "").find("diff: "), std::string::npos) << record.dump();
}

}  // namespace
}  // namespace capsule::daemon

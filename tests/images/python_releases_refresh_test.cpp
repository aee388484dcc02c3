// scripts/refresh-python-releases.py on a small PEPs-like git repository: final releases only, recalls marked,
// complete_through from the data's commit day (or before a release still expected), and a table that
// PythonReleases accepts and the date rule reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "images/toolchain_select.h"
#include "tests/support/test_support.h"

namespace capsule::images {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRecord = R"(
[metadata."3.5"]
pep = 478

[[release."3.5"]]
stage = "3.5.0 final"
state = "actual"
date = 2015-09-13

[metadata."3.6"]
pep = 494

[[release."3.6"]]
stage = "3.6.0 candidate 1"
state = "actual"
date = 2016-12-07

[[release."3.6"]]
stage = "3.6.0 final"
state = "actual"
date = 2016-12-23

[[release."3.6"]]
stage = "3.6.1"
state = "actual"
date = 2017-03-21
note = "recalled due to a test"

[[release."3.6"]]
stage = "3.6.2"
state = "actual"
date = 2017-07-17

[[release."3.6"]]
stage = "3.6.3"
state = "expected"
date = 2017-10-03

[metadata."3.7"]
pep = 537

[[release."3.7"]]
stage = "3.7.0 alpha 1"
state = "actual"
date = 2017-09-19
)";

class RefreshScript : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/capsule-refresh-XXXXXX";
    ASSERT_NE(::mkdtemp(name), nullptr);
    dir_ = name;
    fs::create_directories(dir_ / "peps/release_management");
    std::ofstream(dir_ / "peps/release_management/python-releases.toml") << kRecord;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Commits the record on `day` and runs the script; its exit status.
  int refresh(const std::string& day) const {
    const std::string peps = (dir_ / "peps").string();
    const std::string commit = "cd " + peps + " && git init -q . && git add -A && GIT_COMMITTER_DATE=" + day +
                               "T12:00:00Z git -c user.name=t -c user.email=t@t commit -q -m record";
    if (std::system(commit.c_str()) != 0) return -1;
    const std::string script = std::string(CAPSULE_SOURCE_DIR) + "/scripts/refresh-python-releases.py";
    return std::system(("python3 " + script + " " + peps + " --out " + out().string() + " >/dev/null").c_str());
  }
  fs::path out() const { return dir_ / "python-releases.json"; }

  fs::path dir_;
};

TEST_F(RefreshScript, KeepsFinalReleasesAndEndsBeforeAReleaseStillExpected) {
  ASSERT_EQ(refresh("2018-01-05"), 0);
  const PythonReleases table = PythonReleases::load(out().string());
  // 3.6.3 was due on 2017-10-03 and is still "expected" in data committed later: the table ends the day before.
  EXPECT_EQ(base::format_date(table.complete_through()), "2017-10-02");
  ASSERT_EQ(table.releases().size(), 3u);  // 3.6.0, 3.6.1, 3.6.2: no 3.5, no candidate, no alpha
  EXPECT_EQ(table.releases()[0].version, "3.6.0");
  EXPECT_EQ(base::format_date(table.releases()[0].date), "2016-12-23");
  EXPECT_TRUE(table.find("3.6.1")->recalled);
  EXPECT_FALSE(table.find("3.6.2")->recalled);
  EXPECT_NE(table.source().find("release_management/python-releases.toml at commit"), std::string::npos);
  EXPECT_EQ(python_for_date(table, *base::parse_date("2017-07-20")).version, "3.6.2");
  EXPECT_EQ(python_for_date(table, *base::parse_date("2017-04-01")).version, "3.6.0");  // 3.6.1 recalled
}

TEST_F(RefreshScript, EndsOnTheCommitDayWhenNothingIsOverdue) {
  ASSERT_EQ(refresh("2017-08-01"), 0);
  EXPECT_EQ(base::format_date(PythonReleases::load(out().string()).complete_through()), "2017-08-01");
}

}  // namespace
}  // namespace capsule::images

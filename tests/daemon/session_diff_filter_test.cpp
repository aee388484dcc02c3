// Session diff filters: the repeated include/exclude query values (decoded, checked), which paths a glob shows or
// hides (below a matched directory too), and a diff filtered: entries left out, totals lowered, cut back.
#include "daemon/sessions/session_diff_filter.h"

#include <gtest/gtest.h>

#include "http/response.h"

namespace capsule::daemon {
namespace {

std::string query_error(const std::string& target) {
  try {
    parse_diff_filter(target);
  } catch (const http::ApiError& e) {
    return e.code() + ": " + e.what();
  }
  return "no error";
}

TEST(SessionDiffFilter, ReadsEveryIncludeAndExcludeOfTheQuery) {
  const DiffFilter filter =
      parse_diff_filter("/v1/sessions/s1/diff?patch=1&exclude=target%2F%2A%2A&include=src+dir/**&exclude=*.log");
  EXPECT_EQ(filter.exclude, (std::vector<std::string>{"target/**", "*.log"}));
  EXPECT_EQ(filter.include, (std::vector<std::string>{"src dir/**"}));
  EXPECT_TRUE(parse_diff_filter("/v1/sessions/s1/diff").empty());
  EXPECT_TRUE(parse_diff_filter("/v1/sessions/s1/diff?patch=1").empty());
}

TEST(SessionDiffFilter, RefusesGlobsThatLeaveTheWorkspaceOrCostTooMuch) {
  const std::string diff = "/v1/sessions/s1/diff?";
  EXPECT_EQ(query_error(diff + "exclude="), "invalid_query: exclude: '' is empty");
  EXPECT_EQ(query_error(diff + "exclude=%2Fetc"), "invalid_query: exclude: '/etc' must be relative to the workspace");
  EXPECT_EQ(query_error(diff + "include=a/../b"), "invalid_query: include: 'a/../b' must not hold ..");
  EXPECT_EQ(query_error(diff + "include=.."), "invalid_query: include: '..' must not hold ..");
  EXPECT_EQ(query_error(diff + "exclude=%zz"), "invalid_query: exclude: is not percent-encoded text");
  EXPECT_EQ(query_error(diff + "exclude=**/**/**/**"), "invalid_query: exclude: '**/**/**/**' has more than 3 ** segments");
  EXPECT_EQ(query_error(diff + "exclude=" + std::string(kMaxDiffFilterGlobBytes + 1, 'a')).rfind(
                "invalid_query: exclude: '", 0),
            0u);
  std::string many = diff;
  for (std::size_t i = 0; i <= kMaxDiffFilterGlobs; ++i) many += "exclude=a&";
  EXPECT_EQ(query_error(many), "invalid_query: include, exclude: at most 32 globs");
  EXPECT_EQ(query_error(diff + "exclude=..x"), "no error") << "a name that starts with two dots is a name";
}

TEST(SessionDiffFilter, AGlobHidesWhatItMatchesAndEverythingBelowIt) {
  DiffFilter filter;
  filter.exclude = {"target"};
  EXPECT_FALSE(filter.shows("target"));
  EXPECT_FALSE(filter.shows("target/classes/A.class"));
  EXPECT_FALSE(filter.shows("target/empty/"));
  EXPECT_TRUE(filter.shows("targets/x"));
  EXPECT_TRUE(filter.shows("pom.xml"));
  filter.exclude = {"target/**", "**/__pycache__", "*.log"};
  EXPECT_FALSE(filter.shows("target/surefire-reports/TEST-A.xml"));
  EXPECT_FALSE(filter.shows("src/pkg/__pycache__/m.cpython-311.pyc"));
  EXPECT_FALSE(filter.shows("build.log"));
  EXPECT_FALSE(filter.shows(".hidden.log")) << "dot files are matched, as protect globs match them";
  EXPECT_TRUE(filter.shows("logs/build.txt"));
  filter.include = {"src/**"};
  EXPECT_TRUE(filter.shows("src/main/App.java"));
  EXPECT_FALSE(filter.shows("src/pkg/__pycache__/m.pyc")) << "an exclude wins over an include";
  EXPECT_FALSE(filter.shows("pom.xml"));
}

TEST(SessionDiffFilter, LeavesEntriesOutLowersTheTotalsAndCutsBackToTheListing) {
  WorkspaceDiff diff;
  diff.added = {{"target/a.class", 10}, {"target/b.class", 10}, {"tests/new_test.py", 3}};
  diff.modified = {{"pom.xml", 100}};
  diff.deleted = {{"target/old.jar", 5}};
  diff.total_added = 3;
  diff.total_modified = 1;
  diff.total_deleted = 1;
  DiffFilter filter;
  filter.exclude = {"target/**"};
  EXPECT_EQ(apply_diff_filter(diff, filter), 3u);
  EXPECT_EQ(diff.added, (std::vector<DiffEntry>{{"tests/new_test.py", 3}}));
  EXPECT_EQ(diff.modified, (std::vector<DiffEntry>{{"pom.xml", 100}}));
  EXPECT_TRUE(diff.deleted.empty());
  EXPECT_EQ(diff.total_added, 1u);
  EXPECT_EQ(diff.total_deleted, 0u);
  EXPECT_FALSE(diff.truncated);

  DiffLimits shown;
  shown.max_entries = 1;
  filter.exclude.clear();
  EXPECT_EQ(apply_diff_filter(diff, filter, shown), 0u);
  EXPECT_EQ(diff.modified, (std::vector<DiffEntry>{{"pom.xml", 100}})) << "the path last in order went";
  EXPECT_TRUE(diff.added.empty());
  EXPECT_TRUE(diff.truncated);
  EXPECT_EQ(diff.total_added, 1u) << "the totals still count it";

  const DiffLimits walk = filtered_walk_limits();
  EXPECT_EQ(walk.max_entries, DiffLimits{}.max_entries * 10);
  EXPECT_EQ(walk.max_depth, DiffLimits{}.max_depth);
}

}  // namespace
}  // namespace capsule::daemon

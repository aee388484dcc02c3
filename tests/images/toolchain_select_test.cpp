// Tests for images/toolchain_select: the Python release table, the as_of date rule and toolchain matching.
#include "images/toolchain_select.h"
#include "tests/support/test_support.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace capsule::images {
namespace {

const std::string kTable = std::string(CAPSULE_SOURCE_DIR) + "/images/data/python-releases.json";

Date d(const char* text) {
  auto date = base::parse_date(text);
  EXPECT_TRUE(date.has_value()) << text;
  return date.value_or(Date{});
}

const PythonReleases& table() {
  static const PythonReleases t = PythonReleases::load(kTable);
  return t;
}

std::string rule(const char* as_of) { return python_for_date(table(), d(as_of)).version; }

// A small synthetic table: "<version> <date>" pairs.
PythonReleases synthetic(const std::vector<std::pair<std::string, std::string>>& releases,
                         const std::string& through = "2030-12-31") {
  nlohmann::json doc = {{"schema", 1}, {"source", "test"}, {"complete_through", through}};
  doc["minors"] = nlohmann::json::object();
  doc["releases"] = nlohmann::json::array();
  for (const auto& [v, date] : releases) {
    doc["minors"][v.substr(0, v.rfind('.'))] = {{"pep", 1}};
    doc["releases"].push_back({{"version", v}, {"date", date}});
  }
  return PythonReleases::parse(doc.dump());
}

std::string error_of(const std::function<void()>& f, std::string* code = nullptr) {
  try {
    f();
  } catch (const ToolchainError& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "<no error>";
}

// ---------------------------------------------------------------------------------------------------------
TEST(ToolchainDates, ParseFormatAndOneYearBefore) {
  EXPECT_EQ(base::format_date(d("2025-01-01")), "2025-01-01");
  EXPECT_FALSE(base::parse_date("2025-02-29"));
  EXPECT_TRUE(base::parse_date("2024-02-29"));
  EXPECT_FALSE(base::parse_date("2025-1-01"));
  EXPECT_FALSE(base::parse_date("2025-01-01T00:00:00Z"));
  EXPECT_FALSE(base::parse_date("2025-13-01"));
  EXPECT_FALSE(base::parse_date("20x5-01-01"));
  EXPECT_EQ(base::format_date(one_year_before(d("2025-01-01"))), "2024-01-01");
  EXPECT_EQ(base::format_date(one_year_before(d("2024-02-29"))), "2023-02-28");
  EXPECT_EQ(base::format_date(one_year_before(d("2025-02-28"))), "2024-02-28");
  EXPECT_EQ(base::format_date(one_year_before(d("2025-03-01"))), "2024-03-01");
}

TEST(ToolchainVersions, CompareNumerically) {
  EXPECT_LT(compare_versions("3.9.18", "3.10.2"), 0);
  EXPECT_GT(compare_versions("3.11.10", "3.11.9"), 0);
  EXPECT_EQ(compare_versions("17.0.15", "17.0.15"), 0);
  EXPECT_LT(compare_versions("17", "17.0.15"), 0);
  EXPECT_LT(compare_versions("3.14.0rc1", "3.14.0"), 0);
  EXPECT_LT(compare_versions("3.14.0a7", "3.14.0b1"), 0);
  EXPECT_GT(compare_versions("17.0.15+6", "17.0.15"), 0);
  EXPECT_GT(compare_versions("17.0.15+10", "17.0.15+6"), 0);
  EXPECT_GT(compare_versions("25.0.3", "21.0.7"), 0);
  EXPECT_EQ(compare_versions("3.010", "3.10"), 0);
  EXPECT_GT(compare_versions("100000000000000000000.1", "99999999999999999999.1"), 0);  // no overflow
}

TEST(ToolchainVersions, PrefixMatchesOnDotBoundaries) {
  EXPECT_TRUE(version_matches_prefix("3.11.2", "3.11"));
  EXPECT_TRUE(version_matches_prefix("3.11.2", "3"));
  EXPECT_TRUE(version_matches_prefix("3.11.2", "3.11.2"));
  EXPECT_FALSE(version_matches_prefix("3.11.2", "3.1"));
  EXPECT_FALSE(version_matches_prefix("3.11.2", "3.11.2.1"));
  EXPECT_FALSE(version_matches_prefix("3.11.2", "3.11."));
  EXPECT_FALSE(version_matches_prefix("3.11.2", ""));
  EXPECT_TRUE(version_matches_prefix("17.0.15", "17"));
  EXPECT_FALSE(version_matches_prefix("170.1", "17"));
  EXPECT_TRUE(version_matches_prefix("17.0.15+6", "17.0.15"));
  EXPECT_FALSE(version_matches_prefix("17.0.15rc1", "17.0.15"));
  EXPECT_TRUE(is_valid_version("17.0.15+6"));
  EXPECT_FALSE(is_valid_version("v17"));
  EXPECT_FALSE(is_valid_version("3.11."));
  EXPECT_FALSE(is_valid_version("3..11"));
  EXPECT_FALSE(is_valid_version("3.11 "));
}

// ---------------------------------------------------------------------------------------------------------
TEST(PythonReleaseTable, LoadsTheRepositoryFile) {
  const auto& t = table();
  EXPECT_FALSE(t.source().empty());
  ASSERT_NE(t.find("3.6.0"), nullptr);
  EXPECT_EQ(base::format_date(t.find("3.6.0")->date), "2016-12-23");
  ASSERT_NE(t.find("3.12.8"), nullptr);
  EXPECT_EQ(base::format_date(t.find("3.12.8")->date), "2024-12-03");
  EXPECT_EQ(base::format_date(t.find("3.12.11")->date), "2025-06-03");
  EXPECT_EQ(base::format_date(t.find("3.10.11")->date), "2023-04-05");
  EXPECT_EQ(base::format_date(t.find("3.13.0")->date), "2024-10-07");
  EXPECT_TRUE(t.find("3.9.3")->recalled);
  EXPECT_FALSE(t.find("3.9.4")->recalled);
  for (std::size_t i = 1; i < t.releases().size(); ++i) {
    EXPECT_LT(compare_versions(t.releases()[i - 1].version, t.releases()[i].version), 0);
  }
}

TEST(PythonReleaseTable, RejectsBadDataWithTheCause) {
  std::string code;
  EXPECT_NE(error_of([] { PythonReleases::load("/nonexistent/python-releases.json"); }, &code)
                .find("/nonexistent/python-releases.json: cannot open"),
            std::string::npos);
  EXPECT_EQ(code, "invalid_release_data");
  EXPECT_NE(error_of([] { PythonReleases::parse("{", "x.json"); }).find("x.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { synthetic({{"3.6.0", "2016-12-23"}, {"3.6.2", "2017-07-17"}}); }).find("3.6.1 is missing"),
            std::string::npos);
  EXPECT_NE(error_of([] { synthetic({{"3.6.1", "2017-03-21"}}); }).find("3.6.0 is missing"), std::string::npos);
  EXPECT_NE(error_of([] { synthetic({{"3.6.0", "2016-12-23"}, {"3.6.1", "2016-01-01"}}); }).find("dated before 3.6.0"),
            std::string::npos);
  EXPECT_NE(error_of([] { synthetic({{"3.6.0", "2016-12-23"}, {"3.6.0", "2016-12-23"}}); }).find("listed twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { synthetic({{"3.6.0", "2016-02-30"}}); }).find("releases[0] (3.6.0): \"date\""),
            std::string::npos);
  EXPECT_NE(error_of([] { synthetic({{"3.6.00", "2016-12-23"}}); }).find("version must be 3.Y.Z"), std::string::npos);
  EXPECT_NE(error_of([] { synthetic({{"3.6.0", "2016-12-23"}}, "2016-12-01"); }).find("after complete_through"),
            std::string::npos);
  auto doc = nlohmann::json::parse(R"({"schema":1,"source":"s","complete_through":"2020-01-01","minors":{"3.6":{"pep":494}},
      "releases":[{"version":"3.6.0","date":"2016-12-23","dat":"x"}]})");
  EXPECT_NE(error_of([&] { PythonReleases::parse(doc.dump()); }).find("unknown key \"dat\""), std::string::npos);
  doc["releases"][0].erase("dat");
  doc["releases"][0]["version"] = "3.7.0";
  EXPECT_NE(error_of([&] { PythonReleases::parse(doc.dump()); }).find("minor 3.7 is not in \"minors\""),
            std::string::npos);
  doc.erase("source");
  EXPECT_NE(error_of([&] { PythonReleases::parse(doc.dump()); }).find("\"source\""), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------
TEST(PythonDateRule, BenchmarkVectors) {
  EXPECT_EQ(rule("2025-01-01"), "3.12.8");
  EXPECT_EQ(rule("2025-07-31"), "3.12.11");
  EXPECT_EQ(rule("2023-04-11"), "3.10.11");
  const auto pick = python_for_date(table(), d("2025-01-01"));
  EXPECT_EQ(pick.minor, "3.12");
  EXPECT_EQ(base::format_date(pick.minor_released), "2023-10-02");
  EXPECT_EQ(base::format_date(pick.released), "2024-12-03");
  EXPECT_NE(pick.reason.find("3.12.0 on 2023-10-02 <= 2024-01-01"), std::string::npos) << pick.reason;
}

TEST(PythonDateRule, ExactlyOneYearBoundary) {
  // 3.12.0 came out on 2023-10-02: a year later it qualifies, a day earlier it does not.
  EXPECT_EQ(rule("2024-10-02"), "3.12.7");  // 3.12.7 on 2024-10-01
  EXPECT_EQ(rule("2024-10-01"), "3.11.10");  // 3.11.10 on 2024-09-07
  // Patch boundary: a release dated as_of itself counts.
  EXPECT_EQ(rule("2023-04-05"), "3.10.11");
  EXPECT_EQ(rule("2023-04-04"), "3.10.10");
}

TEST(PythonDateRule, LeapDays) {
  EXPECT_EQ(rule("2024-02-29"), "3.11.8");  // cutoff 2023-02-28 -> 3.11 (3.11.0 2022-10-24); 3.11.8 on 2024-02-06
  // A minor released on Feb 28 qualifies on the next Feb 28 and on a Feb 29 a year later.
  const auto t = synthetic({{"3.6.0", "2016-12-23"}, {"3.7.0", "2023-02-28"}, {"3.7.1", "2024-02-29"}});
  EXPECT_EQ(python_for_date(t, d("2024-02-27")).version, "3.6.0");
  EXPECT_EQ(python_for_date(t, d("2024-02-28")).version, "3.7.0");
  EXPECT_EQ(python_for_date(t, d("2024-02-29")).version, "3.7.1");
  // A minor released on Feb 29 qualifies only from Mar 1 of the next year (Feb 28 is still before it).
  const auto leap = synthetic({{"3.6.0", "2016-12-23"}, {"3.7.0", "2020-02-29"}});
  EXPECT_EQ(python_for_date(leap, d("2021-02-28")).version, "3.6.0");
  EXPECT_EQ(python_for_date(leap, d("2021-03-01")).version, "3.7.0");
  EXPECT_EQ(python_for_date(leap, d("2024-02-29")).version, "3.7.0");
}

TEST(PythonDateRule, NeverBelowThreeSix) {
  EXPECT_EQ(rule("2017-06-01"), "3.6.1");   // no minor a year old yet: the floor 3.6, newest patch by then
  EXPECT_EQ(rule("2017-12-22"), "3.6.4");   // the day before 3.6.0 turns one
  EXPECT_EQ(rule("2017-12-23"), "3.6.4");   // 3.6 by the rule itself
  EXPECT_EQ(rule("2019-06-27"), "3.7.3");   // 3.7.0 (2018-06-27) exactly a year earlier
  EXPECT_EQ(rule("2016-12-23"), "3.6.0");
  const auto before = python_for_date(table(), d("2015-01-01"));
  EXPECT_EQ(before.version, "3.6.0");
  EXPECT_NE(before.reason.find("precedes 3.6.0"), std::string::npos) << before.reason;
  EXPECT_NE(python_for_date(table(), d("2017-06-01")).reason.find("floor 3.6"), std::string::npos);
  // Older minors in the table never win.
  const auto t = synthetic({{"3.5.0", "2015-09-13"}, {"3.6.0", "2016-12-23"}});
  EXPECT_EQ(python_for_date(t, d("2017-01-01")).version, "3.6.0");
}

TEST(PythonDateRule, SkipsRecalledReleases) {
  EXPECT_EQ(rule("2021-11-10"), "3.9.7");  // 3.9.8 (2021-11-05) was recalled; 3.9.9 came on 2021-11-15
  EXPECT_EQ(rule("2021-11-15"), "3.9.9");
  nlohmann::json doc = {{"schema", 1}, {"source", "t"}, {"complete_through", "2030-01-01"},
                        {"minors", {{"3.6", {{"pep", 494}}}}}};
  doc["releases"] = {{{"version", "3.6.0"}, {"date", "2016-12-23"}},
                     {{"version", "3.6.1"}, {"date", "2017-03-21"}, {"recalled", true}}};
  EXPECT_EQ(python_for_date(PythonReleases::parse(doc.dump()), d("2017-04-01")).version, "3.6.0");
}

TEST(PythonDateRule, RefusesDatesBeyondTheTable) {
  std::string code;
  const auto msg = error_of([] { python_for_date(table(), one_year_before(d("2100-01-01"))); }, &code);
  EXPECT_EQ(code, "release_data_outdated");
  const std::string last = base::format_date(table().complete_through());
  EXPECT_NE(msg.find("as_of 2099-01-01 is after " + last + ", the last day the Python release table " + kTable +
                     " covers"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("use an as_of on or before " + last), std::string::npos) << msg;
  EXPECT_NE(msg.find("scripts/refresh-python-releases.py"), std::string::npos) << msg;
  EXPECT_NO_THROW(python_for_date(table(), table().complete_through()));
}

// The table as scripts/refresh-python-releases.py last generated it, from the PEPs repository's release record:
// dates after the old end (2025-08-06) resolve, 3.14 included.
TEST(PythonDateRule, TheRefreshedTableReachesAugust2026) {
  EXPECT_GE(table().complete_through(), d("2026-08-06"));
  EXPECT_EQ(rule("2026-06-01"), "3.13.13");  // 3.13.0 (2024-10-07) <= 2025-06-01; 3.13.13 on 2026-04-07
  EXPECT_EQ(rule("2026-08-06"), "3.13.15");
  ASSERT_NE(table().find("3.14.0"), nullptr);
  EXPECT_EQ(base::format_date(table().find("3.14.0")->date), "2025-10-07");
  EXPECT_TRUE(table().find("3.9.8")->recalled);
  EXPECT_NE(table().source().find("github.com/python/peps"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------
ImageCandidate image(std::string ref, std::string created, std::map<std::string, std::string> toolchains) {
  ImageCandidate i;
  i.ref = std::move(ref);
  i.digest = "sha256:" + std::string(64, 'a');
  i.created = std::move(created);
  for (const auto& [name, version] : toolchains) i.labels[std::string(kToolchainLabelPrefix) + name] = version;
  i.labels["org.opencontainers.image.title"] = "x";
  return i;
}

ToolchainRequest request(std::map<std::string, std::string> toolchains, const char* as_of = nullptr) {
  ToolchainRequest r{std::move(toolchains), std::nullopt};
  if (as_of) r.as_of = d(as_of);
  return r;
}

const std::vector<ImageCandidate> kImages = {
    image("debian/jdk17-maven", "2025-05-20T10:00:00Z", {{"java", "17.0.15"}, {"maven", "3.8.7"}}),
    image("temurin/jdk25", "2025-06-01T00:00:00Z", {{"java", "25.0.3"}}),
    image("debian/python3", "2025-05-20T10:00:00Z", {{"python", "3.11.2"}, {"pip", "23.0.1"}}),
    image("pyenv/python-3.11.13", "2025-06-05T00:00:00Z", {{"python", "3.11.13"}}),
    image("pyenv/python-3.1", "2025-06-05T00:00:00Z", {{"python", "3.1.5"}}),
    image("pyenv/python-3.12.8", "2025-01-02T00:00:00Z", {{"python", "3.12.8"}}),
    image("pyenv/python-3.12.8-rebuilt", "2025-03-02T00:00:00+01:00", {{"python", "3.12.8"}}),
    image("broken", "", {{"python", "not-a-version"}}),
};

TEST(ToolchainMatch, PrefixPicksNewestMatchingVersion) {
  auto c = select_toolchain_image(kImages, request({{"java", "17"}}), nullptr);
  EXPECT_EQ(c.image.ref, "debian/jdk17-maven");
  EXPECT_EQ(c.provided.at("java"), "17.0.15");
  EXPECT_EQ(c.matching_images, 1u);
  EXPECT_NE(c.reason.find("only matching image"), std::string::npos) << c.reason;

  c = select_toolchain_image(kImages, request({{"python", "3.11"}}), nullptr);
  EXPECT_EQ(c.image.ref, "pyenv/python-3.11.13");  // 3.11.13 > 3.11.2 numerically
  EXPECT_EQ(c.matching_images, 2u);
  EXPECT_NE(c.reason.find("newer toolchain versions"), std::string::npos) << c.reason;

  c = select_toolchain_image(kImages, request({{"python", "3"}}), nullptr);
  EXPECT_EQ(c.provided.at("python"), "3.12.8");

  c = select_toolchain_image(kImages, request({{"python", "3.1"}}), nullptr);  // not 3.11.x / 3.12.x
  EXPECT_EQ(c.image.ref, "pyenv/python-3.1");

  c = select_toolchain_image(kImages, request({{"java", "17"}, {"maven", "3.8"}}), nullptr);
  EXPECT_EQ(c.image.ref, "debian/jdk17-maven");
  EXPECT_EQ(c.provided.at("maven"), "3.8.7");
}

TEST(ToolchainMatch, TiesBrokenByCreatedThenRef) {
  auto c = select_toolchain_image(kImages, request({{"python", "3.12.8"}}), nullptr);
  EXPECT_EQ(c.image.ref, "pyenv/python-3.12.8-rebuilt");  // 2025-03-02T00:00+01:00 is newer than 2025-01-02Z
  EXPECT_NE(c.reason.find("newest created time"), std::string::npos) << c.reason;

  std::vector<ImageCandidate> same = {image("b", "2025-01-01T00:00:00Z", {{"python", "3.12.8"}}),
                                      image("a", "2025-01-01T01:00:00+01:00", {{"python", "3.12.8"}}),
                                      image("c", "garbage", {{"python", "3.12.8"}})};
  c = select_toolchain_image(same, request({{"python", "3.12"}}), nullptr);
  EXPECT_EQ(c.image.ref, "a");  // same instant: by ref; unparsable created sorts oldest
  EXPECT_NE(c.reason.find("first by name"), std::string::npos) << c.reason;

  same[0].created = "2025-01-01T00:00:00.5Z";
  EXPECT_EQ(select_toolchain_image(same, request({{"python", "3.12"}}), nullptr).image.ref, "b");
}

// python3 (with Debian's pytest) and python3-base provide the same python: the one without unasked-for
// toolchains wins, even when it is older, so a run's own (date-masked) install decides its test tools.
TEST(ToolchainMatch, TheImageWithFewestToolchainsNotAskedForWins) {
  const std::vector<ImageCandidate> both = {
      image("capsule/python3:bookworm", "2025-02-01T00:00:00Z",
            {{"python", "3.11.2"}, {"pip", "23.0.1"}, {"pytest", "7.2.1"}}),
      image("capsule/python3-base:bookworm", "2025-01-01T00:00:00Z", {{"python", "3.11.2"}, {"pip", "23.0.1"}})};
  auto c = select_toolchain_image(both, request({{"python", "3.11"}}), nullptr);
  EXPECT_EQ(c.image.ref, "capsule/python3-base:bookworm");
  EXPECT_NE(c.reason.find("fewest toolchains not asked for"), std::string::npos) << c.reason;
  // Asking for pytest makes it wanted: only the image that has it matches.
  c = select_toolchain_image(both, request({{"python", "3.11"}, {"pytest", "7"}}), nullptr);
  EXPECT_EQ(c.image.ref, "capsule/python3:bookworm");
  // Naming pip too changes nothing: pytest is still the only toolchain not asked for.
  c = select_toolchain_image(both, request({{"python", "3.11"}, {"pip", "23"}}), nullptr);
  EXPECT_EQ(c.image.ref, "capsule/python3-base:bookworm");
}

TEST(ToolchainMatch, AutoUsesTheDateRuleAndMatchesExactly) {
  auto c = select_toolchain_image(kImages, request({{"python", "auto"}}, "2025-01-01"), &table());
  EXPECT_EQ(c.provided.at("python"), "3.12.8");
  EXPECT_EQ(c.wanted.at("python"), "3.12.8");
  ASSERT_TRUE(c.python_auto);
  EXPECT_EQ(c.python_auto->minor, "3.12");
  EXPECT_NE(c.reason.find("as_of 2025-01-01"), std::string::npos) << c.reason;

  std::string code;
  auto msg = error_of([] { select_toolchain_image(kImages, request({{"python", "auto"}}, "2025-07-31"), &table()); },
                      &code);
  EXPECT_EQ(code, "no_matching_image");
  EXPECT_NE(msg.find("no installed image provides python 3.12.11 (needed for as_of 2025-07-31); import one with "
                     "org.capsule.toolchain.python=3.12.11"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("installed python versions: 3.1.5, 3.11.2, 3.11.13, 3.12.8"), std::string::npos) << msg;

  // Exact: an image with 3.12.8 does not satisfy auto -> 3.12.80 and vice versa.
  std::vector<ImageCandidate> near = {image("x", "", {{"python", "3.12.8.1"}})};
  msg = error_of([&] { select_toolchain_image(near, request({{"python", "auto"}}, "2025-01-01"), &table()); });
  EXPECT_NE(msg.find("python 3.12.8 (needed for as_of 2025-01-01)"), std::string::npos) << msg;
}

TEST(ToolchainMatch, ErrorsNameWhatIsNeeded) {
  std::string code;
  auto msg = error_of([] { select_toolchain_image(kImages, request({{"java", "21"}}), nullptr); }, &code);
  EXPECT_EQ(code, "no_matching_image");
  EXPECT_NE(msg.find("no installed image provides java 21; import one with org.capsule.toolchain.java=21"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("installed java versions: 17.0.15, 25.0.3"), std::string::npos) << msg;

  msg = error_of([] { select_toolchain_image(kImages, request({{"node", "20"}}), nullptr); });
  EXPECT_NE(msg.find("no installed image declares node"), std::string::npos) << msg;

  msg = error_of([] { select_toolchain_image(kImages, request({{"java", "25"}, {"maven", "3.8"}}), nullptr); });
  EXPECT_NE(msg.find("no installed image provides java 25 and maven 3.8 together"), std::string::npos) << msg;

  msg = error_of([] { select_toolchain_image({}, request({{"python", "3.12"}}), nullptr); });
  EXPECT_NE(msg.find("no installed image provides python 3.12"), std::string::npos) << msg;
}

TEST(ToolchainMatch, RejectsBadRequests) {
  std::string code;
  error_of([] { select_toolchain_image(kImages, request({}), nullptr); }, &code);
  EXPECT_EQ(code, "invalid_request");
  auto msg = error_of([] { select_toolchain_image(kImages, request({{"java", "auto"}}, "2025-01-01"), &table()); },
                      &code);
  EXPECT_EQ(code, "invalid_request");
  EXPECT_NE(msg.find("python only"), std::string::npos) << msg;
  msg = error_of([] { select_toolchain_image(kImages, request({{"python", "auto"}}), &table()); }, &code);
  EXPECT_NE(msg.find("needs an as_of date"), std::string::npos) << msg;
  msg = error_of([] { select_toolchain_image(kImages, request({{"python", "auto"}}, "2025-01-01"), nullptr); });
  EXPECT_NE(msg.find("release table"), std::string::npos) << msg;
  msg = error_of([] { select_toolchain_image(kImages, request({{"python", "3.1x.*"}}), nullptr); }, &code);
  EXPECT_EQ(code, "invalid_request");
  msg = error_of([] { select_toolchain_image(kImages, request({{"Java", "17"}}), nullptr); }, &code);
  EXPECT_EQ(code, "invalid_request");
  msg = error_of([] { select_toolchain_image(kImages, request({{"python", "auto"}}, "2099-01-01"), &table()); }, &code);
  EXPECT_EQ(code, "release_data_outdated");
}

// A toolchain layer as toolchain_candidates() gives it: stacked on `base`, labels merged (here the layer's only).
ImageCandidate layer(std::string ref, std::string base, std::map<std::string, std::string> toolchains,
                     std::string unusable = "") {
  ImageCandidate i = image(std::move(ref), "", std::move(toolchains));
  i.base_ref = std::move(base);
  if (unusable.empty()) i.base_digest = "sha256:" + std::string(64, 'b');
  i.unusable = std::move(unusable);
  return i;
}

TEST(ToolchainMatch, LayerImagesCompeteWithTheirBase) {
  std::vector<ImageCandidate> images = kImages;
  images.push_back(layer("pyenv/layer-3.12.11", "debian/base:12", {{"python", "3.12.11"}}));
  auto c = select_toolchain_image(images, request({{"python", "3.12"}}), nullptr);
  EXPECT_EQ(c.image.ref, "pyenv/layer-3.12.11");
  EXPECT_EQ(c.image.base_ref, "debian/base:12");
  EXPECT_EQ(c.image.base_digest, "sha256:" + std::string(64, 'b'));
  EXPECT_EQ(c.matching_images, 3u);
  EXPECT_NE(c.reason.find("pyenv/layer-3.12.11 (sha256:aaaaaaaaaaaa) stacked on debian/base:12 (sha256:bbbbbbbbbbbb) "
                          "provides python 3.12.11"),
            std::string::npos)
      << c.reason;

  // The date rule finds layers too: 2025-07-31 needs 3.12.11, which only the layer has.
  c = select_toolchain_image(images, request({{"python", "auto"}}, "2025-07-31"), &table());
  EXPECT_EQ(c.image.ref, "pyenv/layer-3.12.11");
  EXPECT_EQ(c.provided.at("python"), "3.12.11");

  // Stand-alone images stay candidates as they were, and win over a stack at equal versions.
  EXPECT_TRUE(select_toolchain_image(images, request({{"python", "3.11"}}), nullptr).image.base_ref.empty());
  images.push_back(layer("a/layer-3.11.13", "debian/base:12", {{"python", "3.11.13"}}));
  c = select_toolchain_image(images, request({{"python", "3.11.13"}}), nullptr);
  EXPECT_EQ(c.image.ref, "pyenv/python-3.11.13");
  EXPECT_NE(c.reason.find("same versions, without stacking a layer"), std::string::npos) << c.reason;
}

TEST(ToolchainMatch, UnusableLayersAreNeverChosenButNamed) {
  std::vector<ImageCandidate> images = kImages;
  images.push_back(layer("pyenv/layer-3.13.5", "debian/gone:1", {{"python", "3.13.5"}},
                         "its base debian/gone:1 is not installed"));
  EXPECT_EQ(select_toolchain_image(images, request({{"python", "3"}}), nullptr).provided.at("python"), "3.12.8");
  std::string code;
  const auto msg = error_of([&] { select_toolchain_image(images, request({{"python", "3.13"}}), nullptr); }, &code);
  EXPECT_EQ(code, "no_matching_image");
  EXPECT_NE(msg.find("no installed image provides python 3.13"), std::string::npos) << msg;
  EXPECT_NE(msg.find("; pyenv/layer-3.13.5 would, but its base debian/gone:1 is not installed"), std::string::npos)
      << msg;

  images.push_back(layer("x/both", "debian/gone:1", {{"python", "3.12.8"}, {"java", "25.0.3"}},
                         "its base debian/gone:1 is not installed"));
  const auto together =
      error_of([&] { select_toolchain_image(images, request({{"python", "3.12"}, {"java", "25"}}), nullptr); });
  EXPECT_NE(together.find("java 25 and python 3.12 together"), std::string::npos) << together;
  EXPECT_NE(together.find("; x/both would, but its base debian/gone:1 is not installed"), std::string::npos)
      << together;
  EXPECT_EQ(together.find("layer-3.13.5"), std::string::npos) << "it has no java: " << together;
}

TEST(ToolchainMatch, ParsesTheApiShape) {
  auto r = parse_toolchain_request(nlohmann::json::parse(R"({"python":"auto","maven":"3.8"})"), "2025-01-01");
  EXPECT_EQ(r.toolchains.at("python"), "auto");
  EXPECT_EQ(r.toolchains.at("maven"), "3.8");
  ASSERT_TRUE(r.as_of);
  EXPECT_EQ(base::format_date(*r.as_of), "2025-01-01");
  EXPECT_FALSE(parse_toolchain_request(nlohmann::json::object()).as_of);
  std::string code;
  error_of([] { parse_toolchain_request(nlohmann::json::parse(R"({"java":17})")); }, &code);
  EXPECT_EQ(code, "invalid_request");
  error_of([] { parse_toolchain_request(nlohmann::json::parse(R"(["java"])")); }, &code);
  EXPECT_EQ(code, "invalid_request");
  error_of([] { parse_toolchain_request(nlohmann::json::object(), "2025-02-30"); }, &code);
  EXPECT_EQ(code, "invalid_request");
}

}  // namespace
}  // namespace capsule::images

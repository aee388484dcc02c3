// The spec's date cutoffs: relative spans resolved to absolute dates when parsed (so a stored spec, and a replay
// of it, keep the date), absolute forms kept, per-package cutoffs keyed by canonical names, bad input refused.
#include "spec/as_of.h"

#include <gtest/gtest.h>

#include "http/response.h"
#include "spec/run_spec.h"

namespace capsule::spec {
namespace {

using nlohmann::json;
const base::Date kToday = *base::parse_date("2026-12-03");

std::string as_of_error(const std::string& text) {
  try {
    resolve_as_of(text, "as_of", kToday);
  } catch (const http::ApiError& e) {
    EXPECT_EQ(e.code(), "invalid_spec");
    return e.what();
  }
  return "no error";
}

TEST(AsOf, SpansInDaysAndWeeksBecomeTheDateThatManyDaysBack) {
  for (const char* week : {"7 days", "1 week", "1w", "7d", "P7D", "p1w", "1 Week ago", " 7  days", "P0W7D"})
    EXPECT_EQ(resolve_as_of(week, "as_of", kToday), "2026-11-26") << week;
  EXPECT_EQ(resolve_as_of("2 weeks 3 days", "as_of", kToday), "2026-11-16");
  EXPECT_EQ(resolve_as_of("P1W2D", "as_of", kToday), "2026-11-24");
  EXPECT_EQ(resolve_as_of("0 days", "as_of", kToday), "2026-12-03");
  EXPECT_EQ(resolve_as_of("400 days", "as_of", kToday), "2025-10-29") << "across a year";
  EXPECT_EQ(resolve_as_of("P36500D", "as_of", kToday).size(), 10u);
}

TEST(AsOf, AbsoluteFormsAreKeptAsGiven) {
  for (const char* absolute : {"2024-05-01", "2024-05-01T12:30:00Z", "2024-05-01T12:30:00.5+02:00"})
    EXPECT_EQ(resolve_as_of(absolute, "as_of", kToday), absolute);
}

TEST(AsOf, OtherFormsAreRefused) {
  for (const char* bad : {"", "days", "7", "7 fortnights", "P", "P7", "PT12H", "P1M", "P1Y", "1 month", "-7 days",
                          "7 days ago ago", "7 days later", "2024-13-01", "yesterday", "9999999 days", "P36501D"}) {
    EXPECT_NE(as_of_error(bad).find("as_of"), std::string::npos) << bad;
  }
  EXPECT_NE(as_of_error("P1M").find("days or weeks"), std::string::npos);
  EXPECT_NE(as_of_error(std::string(10000, '7') + " days").find("as_of"), std::string::npos);
}

TEST(AsOf, PackageCutoffsAreKeyedByCanonicalNamesAndPrintedAbsolute) {
  const json given = {{"pypi", {{"Requests", "2024-05-01"}, {"zope.interface", "2 weeks"}}},
                      {"maven", {{"org.slf4j:slf4j-api", "P1W"}}}};
  const proxy::PackageCutoffs cutoffs = parse_package_cutoffs(given, "as_of_packages", kToday);
  ASSERT_EQ(cutoffs.pypi.size(), 2u);
  EXPECT_EQ(cutoffs.pypi.at("requests").text, "2024-05-01T00:00:00Z");
  EXPECT_EQ(cutoffs.pypi.at("zope-interface").text, "2026-11-19T00:00:00Z");
  EXPECT_EQ(cutoffs.maven.at("org.slf4j:slf4j-api").text, "2026-11-26T00:00:00Z");
  const json printed = package_cutoffs_json(cutoffs);
  EXPECT_EQ(printed, json({{"pypi", {{"requests", "2024-05-01T00:00:00Z"}, {"zope-interface", "2026-11-19T00:00:00Z"}}},
                           {"maven", {{"org.slf4j:slf4j-api", "2026-11-26T00:00:00Z"}}}}));
  const proxy::PackageCutoffs again = parse_package_cutoffs(printed, "as_of_packages", *base::parse_date("2030-01-01"));
  EXPECT_EQ(package_cutoffs_json(again), printed) << "printed values are absolute: parsed later, the same";
  EXPECT_EQ(package_cutoffs_json({}), json::object());
}

TEST(AsOf, BadPackageCutoffsAreRefused) {
  const auto error = [](const json& value) {
    try {
      parse_package_cutoffs(value, "as_of_packages", kToday);
    } catch (const http::ApiError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(json::array({"requests=2024-05-01"})).find("must be an object"), std::string::npos);
  EXPECT_NE(error({{"npm", json::object()}}).find("npm"), std::string::npos);
  EXPECT_NE(error({{"pypi", {{"requests", 5}}}}).find("as_of_packages.pypi.requests"), std::string::npos);
  EXPECT_NE(error({{"pypi", {{"requests", "soon"}}}}).find("as_of_packages.pypi.requests"), std::string::npos);
  EXPECT_NE(error({{"pypi", {{"not a name!", "2024-05-01"}}}}).find("not a valid PyPI project name"), std::string::npos);
  EXPECT_NE(error({{"pypi", {{"Foo_Bar", "2024-05-01"}, {"foo-bar", "2024-06-01"}}}}).find("already given"),
            std::string::npos);
  EXPECT_NE(error({{"maven", {{"slf4j-api", "2024-05-01"}}}}).find("groupId:artifactId"), std::string::npos);
  EXPECT_NE(error({{"maven", {{"a:b/../c", "2024-05-01"}}}}).find("groupId:artifactId"), std::string::npos);
  json many = json::object();
  for (std::size_t i = 0; i <= kMaxPackageCutoffs; ++i) many["p" + std::to_string(i)] = "2024-05-01";
  EXPECT_NE(error({{"pypi", many}}).find("at most"), std::string::npos);
}

// In a RunSpec: resolved at parse time, so the printed spec (what the record stores and a replay submits)
// holds absolute values; package cutoffs only with the proxy.
TEST(AsOf, TheRunSpecStoresTheResolvedCutoffs) {
  const LimitPolicy policy = default_limit_policy();
  const RunSpec spec = parse_run_spec(json{{"argv", {"pip", "install", "requests"}},
                                           {"network", "proxy"},
                                           {"as_of", "P7D"},
                                           {"as_of_packages", {{"pypi", {{"Requests", "2024-05-01"}}}}}},
                                      policy);
  ASSERT_TRUE(spec.as_of);
  EXPECT_TRUE(base::parse_date(*spec.as_of)) << *spec.as_of;
  const json printed = to_json(spec);
  EXPECT_EQ(printed["as_of"], *spec.as_of);
  EXPECT_EQ(printed["as_of_packages"], json({{"pypi", {{"requests", "2024-05-01T00:00:00Z"}}}}));
  EXPECT_EQ(to_json(parse_run_spec(printed, policy)), printed);
  EXPECT_FALSE(to_json(parse_run_spec(json{{"argv", {"true"}}}, policy)).contains("as_of_packages"));
  try {
    parse_run_spec(json{{"argv", {"true"}}, {"as_of", "2024-01-01"}, {"as_of_packages", {{"pypi", {{"a", "P1D"}}}}}},
                   policy);
    ADD_FAILURE() << "as_of_packages without the proxy was accepted";
  } catch (const http::ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("only for network \"proxy\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace capsule::spec

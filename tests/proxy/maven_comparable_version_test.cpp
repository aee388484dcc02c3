// Maven's version order: the examples of Maven's POM reference ("Version Order Specification"), qualifier
// ranks, aliases, padding and sub-lists; expected results checked against maven-artifact 3.8.7's ComparableVersion.
#include "proxy/maven/comparable_version.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace capsule::proxy::maven {
namespace {

// Each entry sorts strictly before every later one.
void expect_ascending(const std::vector<std::string>& versions) {
  for (std::size_t i = 0; i < versions.size(); ++i) {
    EXPECT_EQ(compare_versions(versions[i], versions[i]), 0) << versions[i];
    for (std::size_t j = i + 1; j < versions.size(); ++j) {
      EXPECT_LT(compare_versions(versions[i], versions[j]), 0) << versions[i] << " < " << versions[j];
      EXPECT_GT(compare_versions(versions[j], versions[i]), 0) << versions[j] << " > " << versions[i];
    }
  }
}

void expect_equal(const std::vector<std::string>& versions) {
  for (const auto& a : versions)
    for (const auto& b : versions) {
      EXPECT_EQ(compare_versions(a, b), 0) << a << " == " << b;
      EXPECT_EQ(canonical_version(a), canonical_version(b)) << a << " ~ " << b;
    }
}

TEST(MavenVersion, QualifierRanksAroundARelease) {
  expect_ascending({"NotAVersion", "1.0-alpha-1", "1.0-alpha-2", "1.0-beta-1", "1.0-milestone-1", "1.0-rc-1",
                    "1.0-SNAPSHOT", "1.0", "1.0-sp", "1.0-debian", "1.0-jre", "1.0-zzz", "1.0-1", "1.0.1", "1.1",
                    "1.10", "2.0-alpha", "2.0", "10"});
}

TEST(MavenVersion, DocumentedExamples) {
  expect_ascending({"1", "1.1"});                 // number padding
  expect_ascending({"1-snapshot", "1", "1-sp"});  // qualifier padding
  expect_ascending({"1-foo2", "1-foo10"});        // digits after letters compare as numbers
  expect_ascending({"1.foo", "1-1", "1.1"});      // a '.'-number beats a '-'-list beats a qualifier
  expect_equal({"1.foo", "1-foo"});
  expect_equal({"1.ga", "1-ga", "1-0", "1.0", "1"});  // trailing nulls removed
  expect_ascending({"1-ga", "1-sp"});
  expect_ascending({"1-ga.1", "1-sp.1"});
  expect_ascending({"1-sp-1", "1-ga-1", "1-1"});
  expect_equal({"1-a1", "1-alpha-1"});
}

TEST(MavenVersion, AliasesAndCase) {
  expect_equal({"2.0.0.Final", "2.0.0", "2.0.0.GA", "2-final", "2.release", "2.0.0.FINAL"});
  expect_equal({"1.0-cr1", "1.0-rc1", "1.0-RC-1", "1.0rc1"});
  expect_equal({"1.0-b2", "1.0-beta-2", "1.0beta2"});
  expect_equal({"1.0-m3", "1.0-milestone-3"});
  expect_equal({"1.0.0.X1", "1.0.0-X1"});
  // A single letter means alpha/beta/milestone only right before a digit.
  expect_ascending({"1-alpha1", "1-a"});
  expect_ascending({"1-alpha", "1-b"});
}

TEST(MavenVersion, NumbersOfAnySize) {
  expect_equal({"00001", "1"});
  expect_equal({"1.010", "1.10"});
  expect_equal({"1..2", "1.0.2"});
  expect_ascending({"999999999", "12345678901", "12345678901234567890", "12345678901234567891"});
}

TEST(MavenVersion, SubListsAndNullItems) {
  expect_ascending({"1-0.rc", "1", "1-0.1"});  // a list against nothing: its first non-null item decides
  expect_ascending({"1-xyz-1", "1-xyz.1", "1.0.1"});
  expect_ascending({"1.0-SNAPSHOT", "1.0", "1.0-20230101.120000-1"});
  expect_equal({"1--2", "1-0-2"});
  expect_equal({"", "0", "0.0-ga"});
}

TEST(MavenVersion, GuavaAndDebianFlavours) {
  expect_ascending({"r03", "r09", "11.0.2", "22.0", "23.0-rc1", "23.0", "31.1-android", "31.1-jre", "32.0.0-android",
                    "32.0.0-jre", "33.0.0-jre"});
  // Debian's maven-repo also holds the versions "debian" (below every number) and "3.x" (a qualifier of 3).
  expect_ascending({"debian", "1", "3.0", "3.x", "3.0.1", "3.8.7"});
}

TEST(MavenVersion, CanonicalForms) {
  EXPECT_EQ(canonical_version("1.0.0.Final"), "1");
  EXPECT_EQ(canonical_version("1.0-RC1"), "1-rc-1");
  EXPECT_EQ(canonical_version("1.2.3-alpha1"), "1.2.3-alpha-1");
  EXPECT_EQ(canonical_version("1-ga-1"), "1-1");
  EXPECT_EQ(canonical_version("1.foo.bar"), "1.foo-bar");
  EXPECT_EQ(canonical_version("1.a.b.c2"), "1.a.b-c-2");
  EXPECT_EQ(canonical_version("1.ga.1"), "1..1");
  EXPECT_EQ(canonical_version("1.0.1.0.0"), "1.0.1");
  EXPECT_EQ(canonical_version("32.0.0-jre"), "32-jre");
  EXPECT_EQ(canonical_version("00"), "");
}

TEST(MavenVersion, VeryLongVersionsDoNotRecurse) {
  std::string deep;
  for (int i = 0; i < 50000; ++i) deep += "a1";  // 100000 nested sub-lists
  EXPECT_LT(compare_versions(deep, "1"), 0);
  EXPECT_GT(compare_versions(deep + "b", deep), 0);  // ...-a-1-b: an unknown qualifier after a number
}

TEST(MavenVersion, SortsLikeMaven) {
  std::vector<std::string> versions{"1.0", "1.0-SNAPSHOT", "2.0", "1.0.1", "1", "1.0-alpha-1", "1.0-sp", "1.0-1"};
  sort_versions(versions);
  // "1" and "1.0" are equal in Maven's order; their text decides.
  EXPECT_EQ(versions,
            (std::vector<std::string>{"1.0-alpha-1", "1.0-SNAPSHOT", "1", "1.0", "1.0-sp", "1.0-1", "1.0.1", "2.0"}));
}

// Found by fuzz_maven_metadata, and Maven 3.8.7 agrees: "0.0" < "dbian" < "-a2l" < "0.0". A cycle must not
// upset the sort (std::sort may run out of its range on such input).
TEST(MavenVersion, SortSurvivesMavensCycles) {
  EXPECT_LT(compare_versions("0.0", "dbian"), 0);
  EXPECT_LT(compare_versions("dbian", "-a2l"), 0);
  EXPECT_LT(compare_versions("-a2l", "0.0"), 0);
  std::vector<std::string> versions;
  for (int i = 0; i < 40; ++i)
    for (const char* version : {"0.0", "dbian", "-a2l"}) versions.push_back(version + std::to_string(i % 3));
  sort_versions(versions);
  ASSERT_EQ(versions.size(), 120u);
  for (std::size_t i = 1; i < versions.size(); ++i)
    EXPECT_LE(compare_versions(versions[i - 1], versions[i]), 0) << versions[i - 1] << " then " << versions[i];
}

TEST(MavenVersion, SnapshotVersions) {
  for (const char* snapshot :
       {"1.0-SNAPSHOT", "1.0-snapshot", "SNAPSHOT", "1.0-20230101.120000-1", "2.1-20991231.235959-123"})
    EXPECT_TRUE(is_snapshot_version(snapshot)) << snapshot;
  for (const char* release : {"1.0", "1.0-SNAPSHOT-1", "1.0-20230101.120000", "1.0-20230101-120000-1",
                              "1.0-2023010.120000-1", "20230101.120000-1", "1.0-20230101.120000-", ""})
    EXPECT_FALSE(is_snapshot_version(release)) << release;
}

}  // namespace
}  // namespace capsule::proxy::maven

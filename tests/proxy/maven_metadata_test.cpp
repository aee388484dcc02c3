// maven-metadata.xml: inspection of the three kinds, the rewrite as of a cutoff on a guava-like document (strict
// boundary, order, latest/release/lastUpdated, snapshots, undated, nothing left, other content kept, encodings,
// output that re-reads as itself), upstream errors, and synthesis for trees without metadata.
#include "http/error_status.h"
#include "proxy/maven/metadata.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <pugixml.hpp>
#include <string>
#include <vector>

#include "proxy/error.h"

namespace capsule::proxy::maven {
namespace {

// An RFC 3339 instant or a bare date (midnight UTC).
Micros at(const char* text) {
  const auto cutoff = parse_cutoff(text);
  if (!cutoff) throw std::invalid_argument(text);
  return cutoff->at;
}

const char* const kGuava = R"(<?xml version="1.0" encoding="UTF-8"?>
<metadata modelVersion="1.1.0">
  <groupId>com.google.guava</groupId>
  <artifactId>guava</artifactId>
  <versioning>
    <latest>33.0.0-android</latest>
    <release>33.0.0-android</release>
    <versions>
      <version>30.0-jre</version>
      <version>30.0-android</version>
      <version>31.0-rc1</version>
      <version>31.0-jre</version>
      <version>31.0-android</version>
      <version>31.1-jre</version>
      <version>31.1-android</version>
      <version>32.0.0-jre</version>
      <version>32.0.0-android</version>
      <version>32.1.3-jre</version>
      <version>32.1.4-jre</version>
      <version>33.0.0-jre</version>
      <version>33.0.0-android</version>
    </versions>
    <lastUpdated>20240105120000</lastUpdated>
  </versioning>
  <mirrorNote>kept as is</mirrorNote>
</metadata>
)";

// Publish times, not in list order: 31.1-android went out before 31.1-jre, and 32.1.4-jre is a backport
// published after 33.0.0.
const std::map<std::string, Micros>& guava_times() {
  static const std::map<std::string, Micros> times{
      {"30.0-jre", at("2020-10-19T16:00:00Z")},       {"30.0-android", at("2020-10-19T16:00:05Z")},
      {"31.0-rc1", at("2021-09-01T10:00:00Z")},       {"31.0-jre", at("2021-09-24T18:00:00Z")},
      {"31.0-android", at("2021-09-24T18:00:10Z")},   {"31.1-jre", at("2022-03-01T20:00:00Z")},
      {"31.1-android", at("2022-03-01T19:59:00Z")},   {"32.0.0-jre", at("2023-05-26T20:00:00.500000Z")},
      {"32.0.0-android", at("2023-05-26T20:00:30Z")}, {"32.1.3-jre", at("2023-10-11T15:00:00Z")},
      {"32.1.4-jre", at("2024-01-05T12:00:00Z")},     {"33.0.0-jre", at("2023-12-18T19:00:00Z")},
      {"33.0.0-android", at("2023-12-18T19:00:20Z")},
  };
  return times;
}

PublishTime from_table(const std::map<std::string, Micros>& times) {
  return [&times](const std::string& version) -> std::optional<Micros> {
    const auto found = times.find(version);
    if (found == times.end()) return std::nullopt;
    return found->second;
  };
}

// What Maven reads from a rewritten document.
struct Read {
  std::vector<std::string> versions;
  std::optional<std::string> latest, release, last_updated;
};

std::optional<std::string> element_text(const pugi::xml_node& parent, const char* name) {
  const pugi::xml_node node = parent.child(name);
  if (!node) return std::nullopt;
  return std::string(node.text().get());
}

Read read(const std::string& xml) {
  pugi::xml_document document;
  EXPECT_TRUE(document.load_string(xml.c_str())) << xml;
  const pugi::xml_node versioning = document.child("metadata").child("versioning");
  Read result;
  for (const pugi::xml_node& node : versioning.child("versions").children("version"))
    result.versions.push_back(node.text().get());
  result.latest = element_text(versioning, "latest");
  result.release = element_text(versioning, "release");
  result.last_updated = element_text(versioning, "lastUpdated");
  return result;
}

Read rewrite_guava(Micros cutoff) {
  const auto rewritten = rewrite_artifact_metadata(kGuava, from_table(guava_times()), RewriteOptions{cutoff});
  if (!rewritten) return {};
  return read(*rewritten);
}

TEST(MavenMetadata, InspectsTheThreeKinds) {
  const MetadataInfo artifact = inspect_metadata(kGuava);
  EXPECT_EQ(artifact.kind, MetadataInfo::Kind::kArtifact);
  EXPECT_EQ(artifact.group_id, "com.google.guava");
  EXPECT_EQ(artifact.artifact_id, "guava");
  ASSERT_EQ(artifact.versions.size(), 13u);
  EXPECT_EQ(artifact.versions.front(), "30.0-jre");
  EXPECT_EQ(artifact.versions.back(), "33.0.0-android");

  const MetadataInfo plugins = inspect_metadata(R"(<metadata><plugins>
      <plugin><name>Apache Maven Compiler Plugin</name><prefix>compiler</prefix>
        <artifactId>maven-compiler-plugin</artifactId></plugin>
    </plugins></metadata>)");
  EXPECT_EQ(plugins.kind, MetadataInfo::Kind::kPlugins);
  EXPECT_TRUE(plugins.versions.empty());

  const MetadataInfo snapshot = inspect_metadata(R"(<?xml version="1.0"?>
    <metadata modelVersion="1.1.0"><groupId>com.example</groupId><artifactId>lib</artifactId>
      <version>1.0-SNAPSHOT</version>
      <versioning>
        <snapshot><timestamp>20230101.120000</timestamp><buildNumber>3</buildNumber></snapshot>
        <lastUpdated>20230101120000</lastUpdated>
        <snapshotVersions><snapshotVersion><extension>jar</extension><value>1.0-20230101.120000-3</value>
          <updated>20230101120000</updated></snapshotVersion></snapshotVersions>
      </versioning></metadata>)");
  EXPECT_EQ(snapshot.kind, MetadataInfo::Kind::kSnapshot);
  EXPECT_EQ(snapshot.version, "1.0-SNAPSHOT");

  EXPECT_EQ(inspect_metadata("<project><version>1</version></project>").kind, MetadataInfo::Kind::kUnknown);
  EXPECT_EQ(inspect_metadata("<metadata><groupId>g</groupId></metadata>").kind, MetadataInfo::Kind::kUnknown);
}

TEST(MavenMetadata, InspectIgnoresNamespacesAndTrimsText) {
  const MetadataInfo info = inspect_metadata(
      "<m:metadata xmlns:m=\"http://maven.apache.org/METADATA/1.1.0\"><m:groupId> g </m:groupId>"
      "<m:versioning><m:versions><m:version>\n  1.0\n</m:version><m:version/><m:version>2.0</m:version>"
      "</m:versions></m:versioning></m:metadata>");
  EXPECT_EQ(info.kind, MetadataInfo::Kind::kArtifact);
  EXPECT_EQ(info.group_id, "g");
  EXPECT_EQ(info.versions, (std::vector<std::string>{"1.0", "2.0"}));
}

TEST(MavenMetadata, UpstreamGarbageIsABadGateway) {
  const std::vector<std::string> garbage{"<metadata><versioning></metadata>", "not xml at all", "",
                                         std::string("<metadata>\0</metadata>", 22)};
  for (const std::string& bad : garbage) {
    try {
      inspect_metadata(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const ProxyError& error) {
      EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
      EXPECT_EQ(error.code(), "bad_upstream");
      EXPECT_EQ(error.cause().step, "maven-metadata");
      EXPECT_FALSE(error.cause().detail.empty());
    }
  }
  const PublishTime any = [](const std::string&) { return std::optional<Micros>(0); };
  EXPECT_THROW(rewrite_artifact_metadata("<metadata><plugins/></metadata>", any, RewriteOptions{1}), ProxyError);
  EXPECT_THROW(rewrite_artifact_metadata("<<<", any, RewriteOptions{1}), ProxyError);
  // A second <versions> would carry versions past the filter.
  EXPECT_THROW(rewrite_artifact_metadata("<metadata><versioning><versions><version>1</version></versions>"
                                         "<versions><version>2</version></versions></versioning></metadata>",
                                         any, RewriteOptions{1}),
               ProxyError);
}

TEST(MavenMetadata, CutoffIsStrict) {
  const Micros published = guava_times().at("32.0.0-jre");
  const Read at_cutoff = rewrite_guava(published);
  EXPECT_EQ(at_cutoff.versions.size(), 7u);
  EXPECT_EQ(at_cutoff.versions.back(), "31.1-android");
  EXPECT_EQ(at_cutoff.latest, "31.1-jre");
  const Read just_after = rewrite_guava(published + 1);
  EXPECT_EQ(just_after.versions.back(), "32.0.0-jre");
  EXPECT_EQ(just_after.latest, "32.0.0-jre");
  EXPECT_EQ(just_after.last_updated, "20230526200000");  // seconds, truncated
}

TEST(MavenMetadata, KeepsOriginalOrderAndRecomputesPointers) {
  // 31.1-android (19:59) is in, 31.1-jre (20:00) is not: the list keeps its order, latest follows time.
  const Read early = rewrite_guava(at("2022-03-01T19:59:30Z"));
  EXPECT_EQ(early.versions, (std::vector<std::string>{"30.0-jre", "30.0-android", "31.0-rc1", "31.0-jre",
                                                      "31.0-android", "31.1-android"}));
  EXPECT_EQ(early.latest, "31.1-android");
  EXPECT_EQ(early.release, "31.1-android");
  EXPECT_EQ(early.last_updated, "20220301195900");

  // Everything but the backport: latest is 33.0.0-android, the newest publish time, not the last listed.
  const Read before_backport = rewrite_guava(at("2024-01-01"));
  EXPECT_EQ(before_backport.versions.size(), 12u);
  EXPECT_EQ(before_backport.versions[9], "32.1.3-jre");
  EXPECT_EQ(before_backport.versions[10], "33.0.0-jre");
  EXPECT_EQ(before_backport.latest, "33.0.0-android");
  EXPECT_EQ(before_backport.last_updated, "20231218190020");

  // With the backport, the newest publish time is 32.1.4-jre although it is listed before 33.0.0.
  const Read all = rewrite_guava(at("2025-01-01"));
  EXPECT_EQ(all.versions.size(), 13u);
  EXPECT_EQ(all.latest, "32.1.4-jre");
  EXPECT_EQ(all.release, "32.1.4-jre");
  EXPECT_EQ(all.last_updated, "20240105120000");
}

TEST(MavenMetadata, NothingLeftIsNullopt) {
  EXPECT_FALSE(rewrite_artifact_metadata(kGuava, from_table(guava_times()), RewriteOptions{at("2020-10-19")}));
  const PublishTime unknown = [](const std::string&) { return std::optional<Micros>(); };
  EXPECT_FALSE(rewrite_artifact_metadata(kGuava, unknown, RewriteOptions{at("2030-01-01")}));
}

TEST(MavenMetadata, OtherContentIsKept) {
  const auto rewritten = rewrite_artifact_metadata(kGuava, from_table(guava_times()), RewriteOptions{at("2022-01-01")});
  ASSERT_TRUE(rewritten);
  EXPECT_EQ(rewritten->rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u) << *rewritten;
  EXPECT_NE(rewritten->find("<metadata modelVersion=\"1.1.0\">"), std::string::npos);
  EXPECT_NE(rewritten->find("<mirrorNote>kept as is</mirrorNote>"), std::string::npos);
  const MetadataInfo info = inspect_metadata(*rewritten);
  EXPECT_EQ(info.kind, MetadataInfo::Kind::kArtifact);
  EXPECT_EQ(info.group_id, "com.google.guava");
  EXPECT_EQ(info.artifact_id, "guava");
  // Same input, same bytes; and rewriting the result again changes nothing.
  EXPECT_EQ(rewrite_artifact_metadata(kGuava, from_table(guava_times()), RewriteOptions{at("2022-01-01")}), rewritten);
  EXPECT_EQ(rewrite_artifact_metadata(*rewritten, from_table(guava_times()), RewriteOptions{at("2022-01-01")}),
            rewritten);
}

TEST(MavenMetadata, SnapshotsAreNeverRelease) {
  const char* const xml =
      "<metadata><groupId>g</groupId><artifactId>a</artifactId><versioning><versions>"
      "<version>1.0</version><version>1.1-SNAPSHOT</version><version>2.0-SNAPSHOT</version>"
      "</versions></versioning></metadata>";
  const std::map<std::string, Micros> times{
      {"1.0", at("2023-01-01")}, {"1.1-SNAPSHOT", at("2023-02-01")}, {"2.0-SNAPSHOT", at("2023-03-01")}};
  const auto all = rewrite_artifact_metadata(xml, from_table(times), RewriteOptions{at("2024-01-01")});
  ASSERT_TRUE(all);
  EXPECT_EQ(read(*all).latest, "2.0-SNAPSHOT");
  EXPECT_EQ(read(*all).release, "1.0");
  // Missing <latest>/<release>/<lastUpdated> are added, in Maven's order.
  EXPECT_NE(all->find("<latest>2.0-SNAPSHOT</latest>\n    <release>1.0</release>\n    <versions>"), std::string::npos)
      << *all;
  EXPECT_NE(all->find("</versions>\n    <lastUpdated>20230301000000</lastUpdated>"), std::string::npos) << *all;

  const std::map<std::string, Micros> snapshots_first{{"1.1-SNAPSHOT", at("2023-02-01")}};
  const auto only_snapshots =
      rewrite_artifact_metadata(xml, from_table(snapshots_first), RewriteOptions{at("2024-01-01")});
  ASSERT_TRUE(only_snapshots);
  EXPECT_EQ(read(*only_snapshots).versions, std::vector<std::string>{"1.1-SNAPSHOT"});
  EXPECT_EQ(read(*only_snapshots).latest, "1.1-SNAPSHOT");
  EXPECT_FALSE(read(*only_snapshots).release);
}

TEST(MavenMetadata, UndatedVersions) {
  std::map<std::string, Micros> times = guava_times();
  times.erase("31.0-rc1");
  times.erase("31.1-android");
  const Micros cutoff = at("2022-06-01");
  const Read hidden = read(*rewrite_artifact_metadata(kGuava, from_table(times), RewriteOptions{cutoff}));
  EXPECT_EQ(hidden.versions,
            (std::vector<std::string>{"30.0-jre", "30.0-android", "31.0-jre", "31.0-android", "31.1-jre"}));

  // Kept when configured, but an undated version never wins latest over a dated one.
  const Read shown = read(*rewrite_artifact_metadata(kGuava, from_table(times), RewriteOptions{cutoff, true}));
  EXPECT_EQ(shown.versions.size(), 13u - 6u);
  EXPECT_EQ(shown.versions[2], "31.0-rc1");
  EXPECT_EQ(shown.versions[6], "31.1-android");
  EXPECT_EQ(shown.latest, "31.1-jre");
  EXPECT_EQ(shown.last_updated, "20220301200000");

  // All undated: the last listed version is latest, and no lastUpdated is claimed.
  const PublishTime unknown = [](const std::string&) { return std::optional<Micros>(); };
  const Read none_dated = read(*rewrite_artifact_metadata(kGuava, unknown, RewriteOptions{cutoff, true}));
  EXPECT_EQ(none_dated.versions.size(), 13u);
  EXPECT_EQ(none_dated.latest, "33.0.0-android");
  EXPECT_FALSE(none_dated.last_updated);
}

TEST(MavenMetadata, TiesGoToTheLaterVersionInTheList) {
  const char* const xml =
      "<metadata><versioning><versions><version>2.0</version><version>1.5</version>"
      "</versions></versioning></metadata>";
  const PublishTime same = [](const std::string&) { return std::optional<Micros>(100); };
  EXPECT_EQ(read(*rewrite_artifact_metadata(xml, same, RewriteOptions{101})).latest, "1.5");
}

TEST(MavenMetadata, RepeatsAndStrayPointersCannotLeak) {
  const char* const xml =
      "<metadata><version>9.0</version><versioning><latest>9.0</latest><latest>9.0</latest>"
      "<release>9.0</release><release>8.0</release><versions><version>1.0</version>"
      "<version>1.0</version><version>  </version><version>9.0</version></versions>"
      "</versioning></metadata>";
  const std::map<std::string, Micros> times{{"1.0", 10}, {"9.0", 1000}};
  const auto rewritten = rewrite_artifact_metadata(xml, from_table(times), RewriteOptions{500});
  ASSERT_TRUE(rewritten);
  EXPECT_EQ(rewritten->find("9.0"), std::string::npos) << *rewritten;
  EXPECT_EQ(rewritten->find("8.0"), std::string::npos) << *rewritten;
  EXPECT_EQ(read(*rewritten).versions, std::vector<std::string>{"1.0"});
  EXPECT_EQ(inspect_metadata(*rewritten).version, "1.0");
}

// Found by fuzz_maven_metadata: text split by a processing instruction or comment is read up to the split, so
// the served element must hold exactly that text, not the joined remainder ("1.02", never dated).
TEST(MavenMetadata, VersionTextIsWhatWasDated) {
  const char* const xml =
      "<metadata><version> 1.0<?pi x?>2</version><versioning><versions>"
      "<version>\n 1.0<?pi x?>2</version><version>1.1<!-- c -->5</version></versions>"
      "</versioning></metadata>";
  const std::map<std::string, Micros> times{{"1.0", 10}, {"1.1", 20}};
  const auto rewritten = rewrite_artifact_metadata(xml, from_table(times), RewriteOptions{500});
  ASSERT_TRUE(rewritten);
  EXPECT_EQ(read(*rewritten).versions, (std::vector<std::string>{"1.0", "1.1"})) << *rewritten;
  EXPECT_EQ(rewritten->find("1.02"), std::string::npos) << *rewritten;
  EXPECT_EQ(rewritten->find("1.15"), std::string::npos) << *rewritten;
  EXPECT_EQ(inspect_metadata(*rewritten).version, "1.0");
}

TEST(MavenMetadata, Latin1UpstreamBecomesUtf8) {
  const std::string xml =
      "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><metadata><groupId>caf\xe9</groupId>"
      "<versioning><versions><version>1.0</version></versions></versioning></metadata>";
  const PublishTime old = [](const std::string&) { return std::optional<Micros>(0); };
  const auto rewritten = rewrite_artifact_metadata(xml, old, RewriteOptions{1});
  ASSERT_TRUE(rewritten);
  EXPECT_NE(rewritten->find("<groupId>caf\xc3\xa9</groupId>"), std::string::npos) << *rewritten;
  EXPECT_EQ(rewritten->find("ISO-8859-1"), std::string::npos);
}

// Found by fuzz_maven_metadata (minimized): text that is only whitespace once its character references are decoded
// (&#x20;, or nothing for &#x0;) was written raw, switching off the indentation around it; a re-read drops raw
// whitespace, so rewriting the output again gave other bytes. Such text goes; text with anything else stays.
TEST(MavenMetadata, BlankTextIsDroppedSoTheRewriteIsIdempotent) {
  const std::map<std::string, Micros> times{{"T", at("2023-04-11T08:09:10Z")}, {"U", at("2023-04-12")}};
  const RewriteOptions options{at("2024-01-01")};
  const auto rewritten = rewrite_artifact_metadata(
      "<metadata><versioning><versions><version>T</version>&#x0;</versions></versioning></metadata>",
      from_table(times), options);
  ASSERT_TRUE(rewritten);
  EXPECT_EQ(*rewritten,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<metadata>\n"
            "  <versioning>\n"
            "    <latest>T</latest>\n"
            "    <release>T</release>\n"
            "    <versions>\n"
            "      <version>T</version>\n"
            "    </versions>\n"
            "    <lastUpdated>20230411080910</lastUpdated>\n"
            "  </versioning>\n"
            "</metadata>\n");
  EXPECT_EQ(rewrite_artifact_metadata(*rewritten, from_table(times), options), rewritten);

  // The shape of the original finding: blank references between and inside elements, stray text kept.
  const auto mixed = rewrite_artifact_metadata(
      "<metadata><groupId>&#x20;</groupId><versioning>\n   n>\n   <versions>&#9;<version>T</version>&#x20;"
      "<version>dropped</version>&#10;<version>U</version></versions></versioning></metadata>",
      from_table(times), options);
  ASSERT_TRUE(mixed);
  EXPECT_EQ(read(*mixed).versions, (std::vector<std::string>{"T", "U"})) << *mixed;
  EXPECT_NE(mixed->find("<groupId />"), std::string::npos) << *mixed;
  EXPECT_NE(mixed->find("\n   n&gt;\n   <latest>"), std::string::npos) << *mixed;
  EXPECT_NE(mixed->find("<versions>\n      <version>T</version>\n      <version>U</version>\n    </versions>"),
            std::string::npos)
      << *mixed;
  EXPECT_EQ(rewrite_artifact_metadata(*mixed, from_table(times), options), mixed);
}

// pugixml writes a carriage return from &#13; raw, and a reader turns it into a line feed: the version served must
// be the text that was dated, and the rewrite must stay idempotent.
TEST(MavenMetadata, CarriageReturnsSurviveARereading) {
  const PublishTime undated = [](const std::string&) { return std::optional<Micros>(); };
  const RewriteOptions options{at("2024-01-01"), true};
  const auto rewritten = rewrite_artifact_metadata(
      "<metadata><versioning><versions><version>1.0&#13;x</version></versions></versioning>"
      "<note>a&#13;b</note></metadata>",
      undated, options);
  ASSERT_TRUE(rewritten);
  EXPECT_EQ(rewritten->find('\r'), std::string::npos) << *rewritten;
  EXPECT_EQ(read(*rewritten).versions, std::vector<std::string>{"1.0\rx"}) << *rewritten;
  EXPECT_EQ(read(*rewritten).latest, "1.0\rx");
  EXPECT_EQ(rewrite_artifact_metadata(*rewritten, undated, options), rewritten);
}

TEST(MavenMetadata, SynthesizesInMavenOrder) {
  const std::string xml = synthesize_artifact_metadata(
      "org.apache.maven", "maven-core", {"3.8.7", "debian", "3.x", "3.9.0-SNAPSHOT", "3.6.3", "3.8.7", "3.9.0-rc-1"});
  EXPECT_EQ(xml,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<metadata>\n"
            "  <groupId>org.apache.maven</groupId>\n"
            "  <artifactId>maven-core</artifactId>\n"
            "  <versioning>\n"
            "    <latest>3.9.0-SNAPSHOT</latest>\n"
            "    <release>3.9.0-rc-1</release>\n"
            "    <versions>\n"
            "      <version>debian</version>\n"
            "      <version>3.x</version>\n"
            "      <version>3.6.3</version>\n"
            "      <version>3.8.7</version>\n"
            "      <version>3.9.0-rc-1</version>\n"
            "      <version>3.9.0-SNAPSHOT</version>\n"
            "    </versions>\n"
            "  </versioning>\n"
            "</metadata>\n");
  const MetadataInfo info = inspect_metadata(xml);
  EXPECT_EQ(info.kind, MetadataInfo::Kind::kArtifact);
  EXPECT_EQ(info.versions.size(), 6u);
}

TEST(MavenMetadata, SynthesisEscapesAndDatesOnRequest) {
  const std::string xml = synthesize_artifact_metadata("g<&>", "a\"'", {"1.0-SNAPSHOT"}, at("2023-04-11T08:09:10Z"));
  const MetadataInfo info = inspect_metadata(xml);
  EXPECT_EQ(info.group_id, "g<&>");
  EXPECT_EQ(info.artifact_id, "a\"'");
  EXPECT_EQ(read(xml).latest, "1.0-SNAPSHOT");
  EXPECT_FALSE(read(xml).release);
  EXPECT_EQ(read(xml).last_updated, "20230411080910");
  EXPECT_FALSE(read(synthesize_artifact_metadata("g", "a", {"1"})).last_updated);
}

}  // namespace
}  // namespace capsule::proxy::maven

// Maven repository paths: classification table (metadata at its three levels, artifacts with classifiers,
// sidecars, snapshot builds), refusal of paths that leave the repository, and Debian's maven-repo as a real tree.
#include "proxy/maven/repository_path.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace capsule::proxy::maven {
namespace {

using Kind = RepositoryPath::Kind;

struct Expected {
  std::string path;
  Kind kind;
  std::string group_id;
  std::string artifact_id;
  std::string version;
  std::string file_name;
  std::string sidecar;
};

TEST(MavenRepositoryPath, Classification) {
  const std::string guava = "com/google/guava/guava/31.1-jre/";
  const std::string snapshot = "com/example/lib/1.0-SNAPSHOT/";
  const Expected cases[] = {
      {"com/google/guava/guava/maven-metadata.xml", Kind::kMetadata, "com.google.guava", "guava", "",
       "maven-metadata.xml", ""},
      {"com/google/guava/guava/maven-metadata.xml.sha1", Kind::kMetadata, "com.google.guava", "guava", "",
       "maven-metadata.xml", "sha1"},
      // Group-level plugin metadata looks like g/a/ from its path alone.
      {"org/apache/maven/plugins/maven-metadata.xml", Kind::kMetadata, "org.apache.maven", "plugins", "",
       "maven-metadata.xml", ""},
      {snapshot + "maven-metadata.xml.sha512", Kind::kMetadata, "com.example", "lib", "1.0-SNAPSHOT",
       "maven-metadata.xml", "sha512"},
      {"org/maven-metadata.xml", Kind::kMetadata, "org", "", "", "maven-metadata.xml", ""},
      {"maven-metadata.xml.md5", Kind::kMetadata, "", "", "", "maven-metadata.xml", "md5"},
      {"org/apache/maven/plugins/maven-compiler-plugin/3.11.0/maven-compiler-plugin-3.11.0.jar", Kind::kArtifact,
       "org.apache.maven.plugins", "maven-compiler-plugin", "3.11.0", "maven-compiler-plugin-3.11.0.jar", ""},
      {guava + "guava-31.1-jre.pom", Kind::kArtifact, "com.google.guava", "guava", "31.1-jre", "guava-31.1-jre.pom",
       ""},
      {guava + "guava-31.1-jre-sources.jar", Kind::kArtifact, "com.google.guava", "guava", "31.1-jre",
       "guava-31.1-jre-sources.jar", ""},
      {guava + "guava-31.1-jre.pom.sha1", Kind::kArtifact, "com.google.guava", "guava", "31.1-jre",
       "guava-31.1-jre.pom", "sha1"},
      {guava + "guava-31.1-jre.jar.asc", Kind::kArtifact, "com.google.guava", "guava", "31.1-jre", "guava-31.1-jre.jar",
       "asc"},
      {guava + "guava-31.1-jre.jar.asc.sha256", Kind::kArtifact, "com.google.guava", "guava", "31.1-jre",
       "guava-31.1-jre.jar", "asc.sha256"},
      {guava + "guava-31.1-jre.module", Kind::kArtifact, "com.google.guava", "guava", "31.1-jre",
       "guava-31.1-jre.module", ""},
      {guava + "guava-31.1-jre-javadoc.jar.md5", Kind::kArtifact, "com.google.guava", "guava", "31.1-jre",
       "guava-31.1-jre-javadoc.jar", "md5"},
      {snapshot + "lib-1.0-SNAPSHOT.pom", Kind::kArtifact, "com.example", "lib", "1.0-SNAPSHOT", "lib-1.0-SNAPSHOT.pom",
       ""},
      {snapshot + "lib-1.0-20230101.120000-3.jar", Kind::kArtifact, "com.example", "lib", "1.0-SNAPSHOT",
       "lib-1.0-20230101.120000-3.jar", ""},
      {snapshot + "lib-1.0-20230101.120000-3-tests.jar.sha1", Kind::kArtifact, "com.example", "lib", "1.0-SNAPSHOT",
       "lib-1.0-20230101.120000-3-tests.jar", "sha1"},
      // Debian's maven-repo: an artifactId ending in '.'.
      {"org/apache/apache./29/apache.-29-site.xml", Kind::kArtifact, "org.apache", "apache.", "29",
       "apache.-29-site.xml", ""},
      // Not artifact files: other names, a longer version, no extension, no group, a bad build stamp.
      {"com/example/lib/1.0/lib-1.01.jar", Kind::kOther, "", "", "", "lib-1.01.jar", ""},
      {"com/example/lib/1.0/other-1.0.jar", Kind::kOther, "", "", "", "other-1.0.jar", ""},
      {"com/example/lib/1.0/lib-1.0", Kind::kOther, "", "", "", "lib-1.0", ""},
      {"com/example/lib/1.0/lib-1.0.jar.lastUpdated", Kind::kArtifact, "com.example", "lib", "1.0",
       "lib-1.0.jar.lastUpdated", ""},
      {"lib/1.0/lib-1.0.jar", Kind::kOther, "", "", "", "lib-1.0.jar", ""},
      {snapshot + "lib-1.0-2023010.120000-3.jar", Kind::kOther, "", "", "", "lib-1.0-2023010.120000-3.jar", ""},
      {snapshot + "lib-1.0-20230101.120000-.jar", Kind::kOther, "", "", "", "lib-1.0-20230101.120000-.jar", ""},
      {"archetype-catalog.xml", Kind::kOther, "", "", "", "archetype-catalog.xml", ""},
      {"com/example/lib/.sha1", Kind::kOther, "", "", "", ".sha1", ""},
  };
  for (const Expected& expected : cases) {
    const auto parsed = parse_repository_path(expected.path);
    ASSERT_TRUE(parsed) << expected.path;
    EXPECT_EQ(parsed->kind, expected.kind) << expected.path;
    EXPECT_EQ(parsed->path, expected.path);
    EXPECT_EQ(parsed->group_id, expected.group_id) << expected.path;
    EXPECT_EQ(parsed->artifact_id, expected.artifact_id) << expected.path;
    EXPECT_EQ(parsed->version, expected.version) << expected.path;
    EXPECT_EQ(parsed->file_name, expected.file_name) << expected.path;
    EXPECT_EQ(parsed->sidecar, expected.sidecar) << expected.path;
  }
}

TEST(MavenRepositoryPath, MainPathOfASidecar) {
  EXPECT_EQ(parse_repository_path("g/a/1/a-1.jar.asc.sha1")->main_path(), "g/a/1/a-1.jar");
  EXPECT_EQ(parse_repository_path("g/a/maven-metadata.xml.sha256")->main_path(), "g/a/maven-metadata.xml");
  EXPECT_EQ(parse_repository_path("g/a/1/a-1.pom")->main_path(), "g/a/1/a-1.pom");
}

TEST(MavenRepositoryPath, RefusesPathsOutsideTheRepository) {
  const std::vector<std::string> refused{"",
                                         "/com/x/maven-metadata.xml",
                                         "com//x",
                                         "com/./x",
                                         "com/../x",
                                         "..",
                                         ".",
                                         "com/x/",
                                         "com\\x",
                                         "com/x\n",
                                         std::string("com/\0x", 6),
                                         "com/x\x7f",
                                         "com/x\tb",
                                         "../../etc/passwd",
                                         "com/x/.."};
  for (const std::string& bad : refused) EXPECT_FALSE(parse_repository_path(bad)) << bad;
  // Dots inside a segment are ordinary.
  EXPECT_TRUE(parse_repository_path("com/x/..a/...b"));
  EXPECT_TRUE(parse_repository_path("com/x/caf\xc3\xa9"));
}

// Every file of Debian's maven-repo is an artifact of the directories it sits in.
TEST(MavenRepositoryPath, DebianMavenRepoIsAllArtifacts) {
  const std::filesystem::path root = "/usr/share/maven-repo";
  if (!std::filesystem::is_directory(root)) GTEST_SKIP() << root << " is not installed";
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (entry.is_directory()) continue;
    const std::string relative = entry.path().lexically_relative(root).string();
    const auto parsed = parse_repository_path(relative);
    ASSERT_TRUE(parsed) << relative;
    EXPECT_EQ(parsed->kind, Kind::kArtifact) << relative;
    const std::filesystem::path version_dir = entry.path().parent_path();
    EXPECT_EQ(parsed->version, version_dir.filename().string()) << relative;
    EXPECT_EQ(parsed->artifact_id, version_dir.parent_path().filename().string()) << relative;
    ++files;
  }
  EXPECT_GT(files, 0);
}

}  // namespace
}  // namespace capsule::proxy::maven

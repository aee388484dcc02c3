// Maven upstreams: local repository trees (root order, publish-times file and its errors, mtime fallback,
// version listing across roots, request paths that climb refused) and the HTTP repository on a loopback server.
#include "http/error_status.h"
#include "proxy/upstream/maven_upstream.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "proxy/error.h"
#include "tests/proxy/upstream_test_server.h"

namespace capsule::proxy {
namespace {

using testing::error_of;
using testing::LoopbackServer;
using testing::TestRequest;
using testing::TestResponse;

constexpr Micros kSecond = 1000000;

void write_file(const std::filesystem::path& path, const std::string& content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

void set_mtime(const std::filesystem::path& path, std::int64_t seconds) {
  const timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

class LocalMavenMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "maven-mirror-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    base_ = pattern;
    first_ = base_ / "first";
    second_ = base_ / "second";
    const std::filesystem::path a1 = first_ / "org/example/demo";
    const std::filesystem::path a2 = second_ / "org/example/demo";
    write_file(a1 / "1.0/demo-1.0.pom", "<project>first 1.0</project>");
    write_file(a2 / "1.0/demo-1.0.pom", "<project>second 1.0</project>");
    write_file(a2 / "2.0/demo-2.0.pom", "<project>2.0</project>");
    write_file(a2 / "2.0/demo-2.0.jar", std::string(200000, 'j'));
    write_file(a1 / "10.0/demo-10.0.pom", "<project>10.0</project>");
    write_file(a2 / "1.5/demo-1.5.jar", "a jar without a pom");
    std::filesystem::create_directories(a1 / ".cache");
    write_file(a1 / "maven-metadata-local.xml", "<metadata/>");
    set_mtime(a1 / "1.0/demo-1.0.pom", 1600000000);
    set_mtime(a2 / "2.0/demo-2.0.pom", 1700000000);
    write_file(base_ / "outside.jar", "jar outside the roots");
  }
  void TearDown() override { std::filesystem::remove_all(base_); }

  std::filesystem::path write_times(const std::string& content) {
    const std::filesystem::path file = base_ / "publish-times.txt";
    write_file(file, content);
    return file;
  }

  std::filesystem::path base_;
  std::filesystem::path first_;
  std::filesystem::path second_;
};

TEST_F(LocalMavenMirrorTest, RootsAreSearchedInOrder) {
  auto mirror = make_local_maven_mirror({first_, second_}, std::nullopt);
  const MavenFetch pom = mirror->get("org/example/demo/1.0/demo-1.0.pom");
  EXPECT_EQ(pom.status, 200u);
  EXPECT_EQ(pom.body, "<project>first 1.0</project>");
  EXPECT_EQ(pom.last_modified, 1600000000 * kSecond);
  EXPECT_EQ(mirror->get("org/example/demo/2.0/demo-2.0.pom").body, "<project>2.0</project>");

  const MavenFetch missing = mirror->get("org/example/demo/3.0/demo-3.0.pom");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_TRUE(missing.body.empty());
  EXPECT_EQ(mirror->get("org/example/demo/1.0").status, 404u) << "directories are not files";
}

TEST_F(LocalMavenMirrorTest, StreamsJars) {
  auto mirror = make_local_maven_mirror({first_, second_}, std::nullopt);
  std::string body;
  auto sink = [&](const char* data, std::size_t size) { body.append(data, size); };
  EXPECT_EQ(mirror->get_to("org/example/demo/2.0/demo-2.0.jar", sink), 200u);
  EXPECT_EQ(body, std::string(200000, 'j'));
  body.clear();
  EXPECT_EQ(mirror->get_to("org/example/demo/9.9/demo-9.9.jar", sink), 404u);
  EXPECT_TRUE(body.empty());
}

TEST_F(LocalMavenMirrorTest, RequestPathsMayNotClimb) {
  auto mirror = make_local_maven_mirror({first_, second_}, std::nullopt);
  for (const char* path : {"../outside.jar", "org/../../outside.jar", "/etc/passwd", "org//example", "org/./x",
                           "org/example/", "", "org/ex\nample"}) {
    const ProxyError error = error_of([&] { mirror->get(path); });
    EXPECT_EQ(capsule::http::status_for(error.code()), 400u) << path;
    EXPECT_EQ(capsule::http::status_for(error_of([&] { mirror->get_to(path, [](const char*, std::size_t) {}); }).code()), 400u) << path;
  }
  EXPECT_EQ(capsule::http::status_for(error_of([&] { mirror->publish_time("org.example", "../demo", "1.0"); }).code()), 400u);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { mirror->publish_time("org..example", "demo", "1.0"); }).code()), 400u);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { mirror->publish_time("org.example", "demo", ".."); }).code()), 400u);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { mirror->list_versions("org/example", "demo"); }).code()), 400u);
}

// The documented choice: symlinks inside the roots are followed wherever they point (Debian's maven-repo links
// jars into /usr/share/java); only the request path is kept from climbing.
TEST_F(LocalMavenMirrorTest, FollowsSymlinksInTheTree) {
  std::filesystem::create_symlink(base_ / "outside.jar", first_ / "org/example/demo/1.0/demo-1.0.jar");
  auto mirror = make_local_maven_mirror({first_, second_}, std::nullopt);
  EXPECT_EQ(mirror->get("org/example/demo/1.0/demo-1.0.jar").body, "jar outside the roots");
}

TEST_F(LocalMavenMirrorTest, PublishTimesFileWinsOverMtime) {
  const auto file = write_times(
      "# publish times\n"
      "\n"
      "org.example:demo:1.0\t2020-01-02T03:04:05Z\n"
      "  org.example:demo:3.0   2023-04-11T00:00:00.5Z  \r\n"
      "org.example:demo:1.0 2020-01-02T03:04:05Z\n");
  auto mirror = make_local_maven_mirror({first_, second_}, file);
  EXPECT_EQ(mirror->publish_time("org.example", "demo", "1.0"), *parse_timestamp("2020-01-02T03:04:05Z"));
  EXPECT_EQ(mirror->publish_time("org.example", "demo", "3.0"), *parse_timestamp("2023-04-11T00:00:00.5Z"))
      << "listed times count even without a .pom";
  EXPECT_EQ(mirror->publish_time("org.example", "demo", "2.0"), 1700000000 * kSecond) << "else the .pom's mtime";
  EXPECT_EQ(mirror->publish_time("org.example", "demo", "1.5"), std::nullopt) << "no .pom, not listed";

  auto without_file = make_local_maven_mirror({first_, second_}, std::nullopt);
  EXPECT_EQ(without_file->publish_time("org.example", "demo", "1.0"), 1600000000 * kSecond);
}

TEST_F(LocalMavenMirrorTest, MalformedPublishTimesNameFileAndLine) {
  const struct {
    const char* content;
    const char* line;
    const char* detail;
  } cases[] = {
      {"# ok\norg.example:demo:1.0 2020-01-02\n", ":2", "RFC 3339"},
      {"org.example:demo:1.0 2020-01-02T00:00:00Z\n\norg.example:demo 2020-01-02T00:00:00Z\n", ":3",
       "groupId:artifactId:version"},
      {"org.example:demo:1.0:jar 2020-01-02T00:00:00Z\n", ":1", "groupId:artifactId:version"},
      {"org.example:demo:1.0\n", ":1", "expected"},
      {"org..example:demo:1.0 2020-01-02T00:00:00Z\n", ":1", "groupId"},
      {"g:a:1 2020-01-02T00:00:00Z\ng:a:1 2021-01-02T00:00:00Z\n", ":2", "line 1"},
  };
  for (const auto& c : cases) {
    const auto file = write_times(c.content);
    const ProxyError error = error_of([&] { make_local_maven_mirror({first_}, file); });
    EXPECT_EQ(error.code(), "bad_publish_times") << c.content;
    EXPECT_EQ(error.cause().path, file.string() + c.line) << c.content;
    EXPECT_NE(error.cause().detail.find(c.detail), std::string::npos) << error.what();
  }
  EXPECT_EQ(capsule::http::status_for(error_of([&] { make_local_maven_mirror({first_}, base_ / "absent.txt"); }).code()), 502u);
}

TEST_F(LocalMavenMirrorTest, ListsVersionsWithPomsAcrossRoots) {
  auto mirror = make_local_maven_mirror({first_, second_}, std::nullopt);
  const auto versions = mirror->list_versions("org.example", "demo");
  ASSERT_TRUE(versions);
  EXPECT_EQ(*versions, (std::vector<std::string>{"1.0", "10.0", "2.0"}));
  const auto none = mirror->list_versions("org.example", "absent");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(LocalMavenMirrorTest, BadRootsFailAtConstruction) {
  EXPECT_EQ(capsule::http::status_for(error_of([&] { make_local_maven_mirror({first_, base_ / "absent"}, std::nullopt); }).code()), 502u);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { make_local_maven_mirror({}, std::nullopt); }).code()), 400u);
}

TEST(DebianMavenRepo, ListsVersionsAndServesLinkedJars) {
  const std::filesystem::path repo = "/usr/share/maven-repo";
  if (!std::filesystem::exists(repo / "javax/inject/javax.inject/1/javax.inject-1.pom")) {
    GTEST_SKIP() << "Debian's javax.inject is not installed";
  }
  auto mirror = make_local_maven_mirror({repo}, std::nullopt);
  const auto versions = mirror->list_versions("javax.inject", "javax.inject");
  ASSERT_TRUE(versions);
  EXPECT_NE(std::find(versions->begin(), versions->end(), "1"), versions->end());
  std::size_t size = 0;
  EXPECT_EQ(mirror->get_to("javax/inject/javax.inject/1/javax.inject-1.jar",
                           [&](const char*, std::size_t n) { size += n; }),
            200u);
  EXPECT_GT(size, 0u);
  EXPECT_TRUE(mirror->publish_time("javax.inject", "javax.inject", "1"));
}

// ---- HTTP repository against a loopback server ----

HttpClientOptions one_attempt() {
  HttpClientOptions options;
  options.max_attempts = 1;
  return options;
}

TestResponse central_like(const TestRequest& request) {
  const std::vector<std::pair<std::string, std::string>> dated = {{"Last-Modified", "Tue, 11 Apr 2023 10:20:30 GMT"}};
  if (request.target == "/maven2/org/example/demo/1.0/demo-1.0.pom") return {200, dated, "<project/>"};
  if (request.target == "/maven2/org/example/demo/2.0/demo-2.0.pom") return {200, {}, "<project/>"};
  if (request.target == "/maven2/org/example/demo/1.0/demo-1.0.jar") return {200, dated, std::string(100000, 'j')};
  if (request.target == "/maven2/org/example/broken/1.0/broken-1.0.pom") return {500, {}, "oops"};
  if (request.target == "/maven2/org/example/broken/maven-metadata.xml") return {503, {}, "down"};
  return {404, {}, "not found"};
}

TEST(HttpMavenUpstream, GetAndStream) {
  LoopbackServer server(central_like);
  auto upstream = make_http_maven_upstream(std::make_shared<HttpClient>(one_attempt()), server.url("/maven2/"));
  const MavenFetch pom = upstream->get("org/example/demo/1.0/demo-1.0.pom");
  EXPECT_EQ(pom.status, 200u);
  EXPECT_EQ(pom.body, "<project/>");
  EXPECT_EQ(pom.last_modified, *parse_http_date("Tue, 11 Apr 2023 10:20:30 GMT"));
  EXPECT_EQ(upstream->get("org/example/demo/9.9/demo-9.9.pom").status, 404u);

  std::string body;
  EXPECT_EQ(upstream->get_to("org/example/demo/1.0/demo-1.0.jar",
                             [&](const char* data, std::size_t size) { body.append(data, size); }),
            200u);
  EXPECT_EQ(body, std::string(100000, 'j'));
  EXPECT_EQ(upstream->get_to("org/example/demo/9.9/demo-9.9.jar", [](const char*, std::size_t) {}), 404u);

  const ProxyError broken = error_of([&] { upstream->get("org/example/broken/maven-metadata.xml"); });
  EXPECT_EQ(capsule::http::status_for(broken.code()), 502u);
  EXPECT_EQ(broken.code(), "bad_upstream");
  EXPECT_NE(broken.cause().detail.find("503"), std::string::npos) << broken.what();

  const std::size_t before = server.requests().size();
  EXPECT_EQ(capsule::http::status_for(error_of([&] { upstream->get("../etc/passwd"); }).code()), 400u);
  EXPECT_EQ(server.requests().size(), before);
}

TEST(HttpMavenUpstream, PublishTimeIsLastModifiedOfAPomHead) {
  LoopbackServer server(central_like);
  auto upstream = make_http_maven_upstream(std::make_shared<HttpClient>(one_attempt()), server.url("/maven2/"));
  EXPECT_EQ(upstream->publish_time("org.example", "demo", "1.0"), *parse_http_date("Tue, 11 Apr 2023 10:20:30 GMT"));
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "HEAD");
  EXPECT_EQ(requests[0].target, "/maven2/org/example/demo/1.0/demo-1.0.pom");

  EXPECT_EQ(upstream->publish_time("org.example", "demo", "2.0"), std::nullopt) << "no Last-Modified";
  EXPECT_EQ(upstream->publish_time("org.example", "demo", "9.9"), std::nullopt) << "no such .pom";
  EXPECT_EQ(capsule::http::status_for(error_of([&] { upstream->publish_time("org.example", "broken", "1.0"); }).code()), 502u);
  EXPECT_EQ(upstream->list_versions("org.example", "demo"), std::nullopt);
}

}  // namespace
}  // namespace capsule::proxy

// The proxy's HTTP service against the fixture upstream, as a local mirror and over HTTP: masking by cutoff,
// negotiation, escaping, redirects, ETag/304, files and metadata, Maven metadata rewriting and artifact masking,
// pinned listeners, offline mode, coalescing, upstream failures and hash mismatches.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "store/digest.h"
#include "tests/proxy/proxy_test_support.h"

namespace capsule::proxy {
namespace {

using namespace std::chrono_literals;

using testing::FixtureUpstream;
using testing::ServedProxy;
using testing::TempDir;

const std::pair<std::string, std::string> kPip23Accept{
    "Accept", "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"};

ProxyOptions mirror_options(const FixtureUpstream& fixture, const std::filesystem::path& cache) {
  ProxyOptions options;
  options.cache_dir = cache;
  options.pypi_mirror = fixture.info().at("pypi_mirror").get<std::string>();
  options.maven_mirror = {fixture.info().at("maven_mirror").get<std::string>()};
  options.maven_publish_times = fixture.info().at("maven_publish_times").get<std::string>();
  options.workers = 4;
  return options;
}

std::vector<std::string> file_names(const nlohmann::json& page) {
  std::vector<std::string> names;
  for (const auto& file : page.at("files")) names.push_back(file.at("filename"));
  return names;
}

// The fixture tree is built once for the suite (it is only read); every test gets its own cache and proxy.
class MirrorProxyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared_dir = new TempDir();
    shared_fixture = new FixtureUpstream(shared_dir->path() / "fixture", false);
  }
  static void TearDownTestSuite() {
    delete shared_fixture;
    delete shared_dir;
  }
  static inline TempDir* shared_dir = nullptr;
  static inline FixtureUpstream* shared_fixture = nullptr;

  TempDir dir;
  const FixtureUpstream& fixture = *shared_fixture;
  ServedProxy served{mirror_options(fixture, dir.path() / "cache")};
};

TEST_F(MirrorProxyTest, ProjectPageShowsOnlyFilesUploadedBeforeTheCutoff) {
  const auto early = served.get("/pypi/snapshot/2022-07-01/simple/alpha/", {kPip23Accept});
  ASSERT_EQ(early.status, 200u) << early.body;
  EXPECT_EQ(early.headers.at("Content-Type"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(early.headers.at("Vary"), "Accept");
  const auto page = nlohmann::json::parse(early.body);
  EXPECT_EQ(page["versions"], nlohmann::json({"1.0", "1.1"}));
  EXPECT_EQ(file_names(page), (std::vector<std::string>{"alpha-1.0-py3-none-any.whl", "alpha-1.0.tar.gz",
                                                        "alpha-1.1-py3-none-any.whl", "alpha-1.1.tar.gz"}));
  EXPECT_EQ(page["files"][2]["upload-time"], "2022-06-01T12:30:00.123456Z");  // byte-exact
  EXPECT_EQ(page["files"][2]["url"], "../../files/alpha/alpha-1.1-py3-none-any.whl");
  EXPECT_FALSE(early.body.find("\"dist-info-metadata\"") != std::string::npos);

  const auto later = nlohmann::json::parse(served.get("/pypi/snapshot/2024-01-01/simple/alpha/", {kPip23Accept}).body);
  EXPECT_EQ(later["versions"], nlohmann::json({"1.0", "1.1", "2.0"}));
}

TEST_F(MirrorProxyTest, CutoffBoundaryIsStrict) {
  const auto at = nlohmann::json::parse(
      served.get("/pypi/snapshot/2022-06-01T12:30:00.123456Z/simple/alpha/", {kPip23Accept}).body);
  EXPECT_EQ(at["versions"], nlohmann::json({"1.0"}));
  const auto after = nlohmann::json::parse(
      served.get("/pypi/snapshot/2022-06-01T12:30:00.123457Z/simple/alpha/", {kPip23Accept}).body);
  EXPECT_EQ(after["versions"], nlohmann::json({"1.0", "1.1"}));
}

TEST_F(MirrorProxyTest, BadCutoffNamesAndAcceptHeaders) {
  EXPECT_EQ(served.get("/pypi/snapshot/2022-13-01/simple/alpha/").status, 400u);
  EXPECT_EQ(served.get("/pypi/snapshot/yesterday/simple/alpha/").status, 400u);
  const auto redirect = served.get("/pypi/snapshot/2024-01-01/simple/Gamma_Pkg/");
  EXPECT_EQ(redirect.status, 301u);
  EXPECT_EQ(redirect.headers.at("Location"), "/pypi/snapshot/2024-01-01/simple/gamma-pkg/");
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/alpha").status, 301u);
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/alpha/", {{"Accept", "application/xml"}}).status, 406u);
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/no-such-project/").status, 404u);
  EXPECT_EQ(served.get("/pypi/snapshot/2020-01-01/simple/alpha/").status, 404u);  // nothing before it
}

TEST_F(MirrorProxyTest, OldPipGetsEscapedHtml) {
  const auto html = served.get("/pypi/snapshot/2024-01-01/simple/beta/", {{"Accept", "text/html"}});
  ASSERT_EQ(html.status, 200u);
  EXPECT_EQ(html.headers.at("Content-Type").rfind("text/html", 0), 0u);
  EXPECT_NE(html.body.find("data-yanked=\"broken &quot;&lt;build&gt;&quot; &amp; &#x27;co&#x27;\""), std::string::npos)
      << html.body;
  EXPECT_NE(html.body.find("data-upload-time=\"2023-06-01T00:00:00.000000Z\""), std::string::npos);
  EXPECT_NE(html.body.find("#sha256="), std::string::npos);
}

TEST_F(MirrorProxyTest, UndatedFilesAreHidden) {
  const auto page = nlohmann::json::parse(served.get("/pypi/snapshot/2024-01-01/simple/gamma-pkg/", {kPip23Accept}).body);
  EXPECT_EQ(page["versions"], nlohmann::json({"0.2"}));
}

TEST_F(MirrorProxyTest, EtagGives304) {
  const auto first = served.get("/pypi/snapshot/2024-01-01/simple/alpha/", {kPip23Accept});
  const auto etag = first.headers.at("ETag");
  const auto second = served.get("/pypi/snapshot/2024-01-01/simple/alpha/", {kPip23Accept, {"If-None-Match", etag}});
  EXPECT_EQ(second.status, 304u);
  EXPECT_TRUE(second.body.empty());
  const auto other_cutoff = served.get("/pypi/snapshot/2022-07-01/simple/alpha/", {kPip23Accept, {"If-None-Match", etag}});
  EXPECT_EQ(other_cutoff.status, 200u);
}

TEST_F(MirrorProxyTest, FilesAndMetadataAreServedVerifiedAndMaskedByUrl) {
  const auto mirror = std::filesystem::path(fixture.info().at("pypi_mirror").get<std::string>());
  const auto wheel = served.get("/pypi/snapshot/2022-07-01/files/alpha/alpha-1.1-py3-none-any.whl");
  ASSERT_EQ(wheel.status, 200u) << wheel.body;
  EXPECT_EQ(wheel.body, testing::read_file(mirror / "files/alpha-1.1-py3-none-any.whl"));
  const auto metadata = served.get("/pypi/snapshot/2022-07-01/files/alpha/alpha-1.1-py3-none-any.whl.metadata");
  ASSERT_EQ(metadata.status, 200u);
  EXPECT_NE(metadata.body.find("Version: 1.1"), std::string::npos);
  EXPECT_EQ(served.get("/pypi/snapshot/2022-07-01/files/alpha/alpha-1.1.tar.gz.metadata").status, 404u);
  // Published after the cutoff: 404 even by direct URL, and even once cached for a later cutoff.
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/files/alpha/alpha-2.0-py3-none-any.whl").status, 200u);
  EXPECT_EQ(served.get("/pypi/snapshot/2022-07-01/files/alpha/alpha-2.0-py3-none-any.whl").status, 404u);
  EXPECT_EQ(served.get("/pypi/snapshot/2022-07-01/files/alpha/nothing.whl").status, 404u);
}

TEST_F(MirrorProxyTest, MavenMetadataIsRewrittenForTheCutoff) {
  const auto xml = served.get("/maven/snapshot/2022-12-31/org/capsule/fixture/lib/maven-metadata.xml");
  ASSERT_EQ(xml.status, 200u) << xml.body;
  EXPECT_NE(xml.body.find("<version>1.1</version>"), std::string::npos);
  EXPECT_EQ(xml.body.find("<version>1.2</version>"), std::string::npos);
  EXPECT_NE(xml.body.find("<release>1.1</release>"), std::string::npos);
  EXPECT_NE(xml.body.find("<latest>1.1</latest>"), std::string::npos);
  EXPECT_NE(xml.body.find("<lastUpdated>20220801000000</lastUpdated>"), std::string::npos);
  const auto sha1 = served.get("/maven/snapshot/2022-12-31/org/capsule/fixture/lib/maven-metadata.xml.sha1");
  ASSERT_EQ(sha1.status, 200u);
  EXPECT_EQ(sha1.body.size(), 40u);
  const auto md5 = served.get("/maven/snapshot/2022-12-31/org/capsule/fixture/lib/maven-metadata.xml.md5");
  EXPECT_EQ(md5.body.size(), 32u);
  EXPECT_EQ(served.get("/maven/snapshot/2021-01-01/org/capsule/fixture/lib/maven-metadata.xml").status, 404u);
}

TEST_F(MirrorProxyTest, MavenArtifactsOfLaterVersionsAre404AndOthersByteIdentical) {
  const auto maven = std::filesystem::path(fixture.info().at("maven_mirror").get<std::string>());
  const auto jar = served.get("/maven/snapshot/2022-12-31/org/capsule/fixture/lib/1.1/lib-1.1.jar");
  ASSERT_EQ(jar.status, 200u);
  EXPECT_EQ(jar.body, testing::read_file(maven / "org/capsule/fixture/lib/1.1/lib-1.1.jar"));
  EXPECT_EQ(served.get("/maven/snapshot/2022-12-31/org/capsule/fixture/lib/1.1/lib-1.1.jar.sha1").body,
            testing::read_file(maven / "org/capsule/fixture/lib/1.1/lib-1.1.jar.sha1"));
  for (const char* path : {"lib-1.2.jar", "lib-1.2.pom", "lib-1.2.pom.sha1", "lib-1.2.jar.md5"}) {
    EXPECT_EQ(served.get(std::string("/maven/snapshot/2022-12-31/org/capsule/fixture/lib/1.2/") + path).status, 404u)
        << path;
  }
  EXPECT_EQ(served.get("/maven/snapshot/2022-12-31/org/capsule/fixture/lib/9.9/lib-9.9.jar").status, 404u);
}

TEST_F(MirrorProxyTest, PluginGroupMetadataAndTheProjectListPassThrough) {
  const auto maven = std::filesystem::path(fixture.info().at("maven_mirror").get<std::string>());
  const auto plugins = served.get("/maven/snapshot/2021-01-01/org/capsule/fixture/maven-metadata.xml");
  ASSERT_EQ(plugins.status, 200u) << plugins.body;
  EXPECT_EQ(plugins.body, testing::read_file(maven / "org/capsule/fixture/maven-metadata.xml"));
  const auto index = served.get("/pypi/snapshot/2021-01-01/simple/", {kPip23Accept});
  ASSERT_EQ(index.status, 200u) << index.body;
  std::vector<std::string> names;
  const auto listing = nlohmann::json::parse(index.body);
  for (const auto& project : listing.at("projects")) names.push_back(project.at("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"alpha", "beta", "gamma-pkg"}));
  const auto html = served.get("/pypi/snapshot/2021-01-01/simple/", {{"Accept", "text/html"}});
  EXPECT_NE(html.body.find("href=\"alpha/\""), std::string::npos) << html.body;
}

TEST_F(MirrorProxyTest, PathTraversalNeverLeavesTheMirror) {
  for (const char* path : {"/maven/snapshot/2024-01-01/org/..%2F..%2F..%2F..%2Fetc/passwd",
                           "/maven/snapshot/2024-01-01/%2e%2e/%2e%2e/etc/passwd",
                           "/maven/snapshot/2024-01-01/org/capsule/fixture/lib/1.1/..%2F..%2F..%2F..%2F..%2Fpublish-times.txt",
                           "/pypi/snapshot/2024-01-01/files/alpha/..%2F..%2Fsimple%2Falpha%2Findex.json",
                           "/pypi/snapshot/2024-01-01/files/..%2Fetc/passwd",
                           "/pypi/snapshot/2024-01-01/simple/..%2F..%2Fetc/"}) {
    const auto answer = served.get(path);
    EXPECT_TRUE(answer.status == 400 || answer.status == 404) << path << " -> " << answer.status << " " << answer.body;
  }
}

TEST(PinnedListener, OtherCutoffsAreRefusedAndServedObjectsLogged) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", false);
  auto log = std::make_shared<ServedLog>();
  ServedProxy served(mirror_options(fixture, dir.path() / "cache"), {parse_cutoff("2022-07-01"), log});
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/alpha/").status, 403u);
  EXPECT_EQ(served.get("/pypi/snapshot/2022-07-01T00:00:00Z/simple/alpha/").status, 200u);
  const auto wheel = served.get("/pypi/snapshot/2022-07-01/files/alpha/alpha-1.1-py3-none-any.whl");
  ASSERT_EQ(wheel.status, 200u);
  const auto objects = log->objects();
  ASSERT_EQ(objects.size(), 2u);
  EXPECT_EQ(objects[1].url, "/pypi/snapshot/2022-07-01/files/alpha/alpha-1.1-py3-none-any.whl");
  EXPECT_EQ(objects[1].sha256, store::sha256_of(wheel.body).hex());
  EXPECT_EQ(objects[1].size, wheel.body.size());
  EXPECT_EQ(objects[1].source, "upstream");
}

// A run's as_of_packages: the packages it names are dated by their own cutoffs, pages and files alike; every
// other package keeps the listener's.
TEST(PinnedListener, PackageCutoffsDateOnlyTheirPackages) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", false);
  PackageCutoffs packages;
  packages.pypi.emplace("alpha", *parse_cutoff("2024-01-01"));
  packages.maven.emplace("org.capsule.fixture:lib", *parse_cutoff("2023-04-01"));
  ServedProxy served(mirror_options(fixture, dir.path() / "cache"),
                     {parse_cutoff("2022-07-01"), std::make_shared<ServedLog>(), nullptr, packages});
  const auto alpha = served.get("/pypi/snapshot/2022-07-01/simple/alpha/", {kPip23Accept});
  ASSERT_EQ(alpha.status, 200u) << alpha.body;
  EXPECT_EQ(nlohmann::json::parse(alpha.body)["versions"], nlohmann::json({"1.0", "1.1", "2.0"}));
  EXPECT_EQ(served.get("/pypi/snapshot/2022-07-01/files/alpha/alpha-2.0-py3-none-any.whl").status, 200u);
  const auto beta = served.get("/pypi/snapshot/2022-07-01/simple/beta/", {kPip23Accept});
  ASSERT_EQ(beta.status, 200u) << beta.body;
  EXPECT_EQ(nlohmann::json::parse(beta.body)["versions"], nlohmann::json({"0.9"}));
  EXPECT_EQ(served.get("/pypi/snapshot/2022-07-01/files/beta/beta-1.0-py3-none-any.whl").status, 404u);

  const auto lib = served.get("/maven/snapshot/2022-07-01/org/capsule/fixture/lib/maven-metadata.xml");
  ASSERT_EQ(lib.status, 200u) << lib.body;
  EXPECT_NE(lib.body.find("<version>1.2</version>"), std::string::npos) << lib.body;
  EXPECT_EQ(lib.body.find("<version>2.0</version>"), std::string::npos) << lib.body;
  EXPECT_EQ(served.get("/maven/snapshot/2022-07-01/org/capsule/fixture/lib/1.2/lib-1.2.jar").status, 200u);
  const auto parent = served.get("/maven/snapshot/2022-07-01/org/capsule/fixture/parent/maven-metadata.xml");
  ASSERT_EQ(parent.status, 200u) << parent.body;
  EXPECT_EQ(parent.body.find("<version>1.1</version>"), std::string::npos) << parent.body;
  EXPECT_EQ(served.get("/maven/snapshot/2022-07-01/org/capsule/fixture/parent/1.1/parent-1.1.pom").status, 404u);
}

ProxyOptions http_options(const FixtureUpstream& fixture, const std::filesystem::path& cache) {
  ProxyOptions options;
  options.cache_dir = cache;
  options.pypi_index_url = fixture.url("/simple/");
  options.maven_url = fixture.url("/maven/");
  options.workers = 8;
  return options;
}

TEST(HttpUpstreamProxy, ConcurrentRequestsCauseOneUpstreamFetch) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", true);
  ServedProxy served(http_options(fixture, dir.path() / "cache"));
  fixture.control({{"delay_ms", 300}});
  std::vector<std::future<unsigned>> results;
  for (int i = 0; i < 8; ++i) {
    results.push_back(std::async(std::launch::async, [&] {
      return served.get("/pypi/snapshot/2024-01-01/files/beta/beta-1.0-py3-none-any.whl").status;
    }));
  }
  for (auto& result : results) EXPECT_EQ(result.get(), 200u);
  EXPECT_EQ(fixture.count("GET /simple/beta/"), 1);
  EXPECT_EQ(fixture.count("GET /pypi/files/beta-1.0-py3-none-any.whl"), 1);
}

TEST(HttpUpstreamProxy, ASlowUpstreamForOneSandboxDoesNotDelayAnothersCachedPage) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", true);
  ServedProxy served(http_options(fixture, dir.path() / "cache"), {std::nullopt, std::make_shared<ServedLog>()});
  const std::string other = served.add_listener({std::nullopt, std::make_shared<ServedLog>()});
  const std::string cached = other + "/pypi/snapshot/2024-01-01/simple/beta/";
  ASSERT_EQ(served.get_url(cached).status, 200u);  // now in the proxy's cache
  fixture.control({{"delay_ms", 5000}});
  // One sandbox asks for more uncached pages than there are workers; each waits 5 s on the upstream.
  std::vector<std::future<unsigned>> slow;
  for (int i = 0; i < 8; ++i) {  // as many as the proxy has workers
    slow.push_back(std::async(std::launch::async, [&, i] {
      return served.get("/pypi/snapshot/2024-01-01/simple/slow-" + std::to_string(i) + "/").status;
    }));
  }
  std::this_thread::sleep_for(1s);  // lets them take their workers first
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(served.get_url(cached).status, 200u);
  RecordProperty("cached_page_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      std::chrono::steady_clock::now() - asked).count()));
  // Before, every worker was held by the slow sandbox: the cached page came only after some of those ended.
  std::size_t done = 0;
  for (auto& result : slow) done += result.wait_for(0s) == std::future_status::ready ? 1 : 0;
  EXPECT_EQ(done, 0u) << "the cached page waited for the other sandbox's slow upstream";
  for (auto& result : slow) result.get();
}

TEST(HttpUpstreamProxy, RevalidatesWithEtagAfterTheTtl) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", true);
  auto options = http_options(fixture, dir.path() / "cache");
  options.index_ttl = std::chrono::seconds(0);
  ServedProxy served(options);
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/alpha/").status, 200u);
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/alpha/").status, 200u);
  EXPECT_EQ(fixture.count("GET /simple/alpha/"), 2);  // the second one conditional, answered 304
}

TEST(HttpUpstreamProxy, HashMismatchIsRejectedAndNothingCached) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", true);
  ServedProxy served(http_options(fixture, dir.path() / "cache"));
  fixture.control({{"corrupt", {"alpha-1.0.tar.gz"}}});
  const auto bad = served.get("/pypi/snapshot/2024-01-01/files/alpha/alpha-1.0.tar.gz");
  EXPECT_EQ(bad.status, 502u);
  EXPECT_NE(bad.body.find("hash_mismatch"), std::string::npos) << bad.body;
  fixture.control({{"corrupt", nlohmann::json::array()}});
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/files/alpha/alpha-1.0.tar.gz").status, 200u);
}

TEST(HttpUpstreamProxy, UpstreamDownIs502AndCachedPagesSurvive) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", true);
  auto options = http_options(fixture, dir.path() / "cache");
  options.index_ttl = std::chrono::seconds(0);
  ServedProxy served(options);
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/alpha/").status, 200u);
  fixture.control({{"fail_next", 1000}});
  EXPECT_EQ(served.get("/pypi/snapshot/2024-01-01/simple/alpha/").status, 200u);  // stale copy
  const auto beta = served.get("/pypi/snapshot/2024-01-01/simple/beta/");
  EXPECT_EQ(beta.status, 502u) << beta.body;
}

TEST(HttpUpstreamProxy, OfflineServesTheCacheAndMissesAre503) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", true);
  const auto cache = dir.path() / "cache";
  {
    ServedProxy warm(http_options(fixture, cache));
    ASSERT_EQ(warm.get("/pypi/snapshot/2024-01-01/files/alpha/alpha-1.1.tar.gz").status, 200u);
    ASSERT_EQ(warm.get("/maven/snapshot/2024-01-01/org/capsule/fixture/lib/maven-metadata.xml").status, 200u);
  }
  const int before = fixture.count("GET /simple/alpha/");
  auto options = http_options(fixture, cache);
  options.offline = true;
  ServedProxy offline(options);
  EXPECT_EQ(offline.get("/pypi/snapshot/2024-01-01/simple/alpha/").status, 200u);
  EXPECT_EQ(offline.get("/pypi/snapshot/2024-01-01/files/alpha/alpha-1.1.tar.gz").status, 200u);
  const auto miss = offline.get("/pypi/snapshot/2024-01-01/files/alpha/alpha-1.0.tar.gz");
  EXPECT_EQ(miss.status, 503u);
  EXPECT_NE(miss.body.find("offline"), std::string::npos);
  EXPECT_EQ(offline.get("/pypi/snapshot/2024-01-01/simple/beta/").status, 503u);
  EXPECT_EQ(offline.get("/maven/snapshot/2024-01-01/org/capsule/fixture/lib/maven-metadata.xml").status, 200u);
  EXPECT_EQ(fixture.count("GET /simple/alpha/"), before);
}

// Two proxies on one cache directory, as two capsuled on the nodes of a cluster share one: their singleflights
// are separate, so only the cache's fetch lock keeps them from fetching the same file twice.
TEST(HttpUpstreamProxy, TwoProxiesSharingACacheFetchEachFileOnce) {
  TempDir dir;
  FixtureUpstream fixture(dir.path() / "fixture", true);
  ServedProxy first(http_options(fixture, dir.path() / "cache"));
  ServedProxy second(http_options(fixture, dir.path() / "cache"));
  fixture.control({{"delay_ms", 300}});
  std::vector<std::future<unsigned>> results;
  for (int i = 0; i < 8; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      return (i % 2 ? first : second).get("/pypi/snapshot/2024-01-01/files/beta/beta-1.0-py3-none-any.whl").status;
    }));
  }
  for (auto& result : results) EXPECT_EQ(result.get(), 200u);
  EXPECT_EQ(fixture.count("GET /pypi/files/beta-1.0-py3-none-any.whl"), 1);
  EXPECT_LE(fixture.count("GET /simple/beta/"), 2);  // index pages are each proxy's own (with their TTL)
}

}  // namespace
}  // namespace capsule::proxy

// Frozen (replay) listeners: exactly the original's objects from the cache blobs, the same bytes for pages too,
// no upstream needed, the cutoff still enforced, anything else refused by name and logged.
#include <gtest/gtest.h>

#include "proxy/frozen_set.h"
#include "store/blob_store.h"
#include "store/digest.h"
#include "tests/proxy/proxy_test_support.h"

namespace capsule::proxy {
namespace {

using testing::FixtureUpstream;
using testing::ServedProxy;
using testing::TempDir;

const std::pair<std::string, std::string> kJsonAccept{"Accept", "application/vnd.pypi.simple.v1+json"};

TEST(FrozenSet, KeepsTheFirstObjectOfAUrlAndSkipsMalformedEntries) {
  const std::string a(64, 'a'), b(64, 'b');
  const FrozenSet set = FrozenSet::from_dependencies(
      "run-1", nlohmann::json::array({{{"url", "/x"}, {"sha256", a}, {"size", 3}},
                                      {{"url", "/x"}, {"sha256", b}, {"size", 4}},
                                      {{"url", "/y"}, {"sha256", b}},
                                      "junk"}));
  EXPECT_EQ(set.size(), 1u);
  ASSERT_NE(set.find("/x"), nullptr);
  EXPECT_EQ(set.find("/x")->sha256, a);
  EXPECT_EQ(set.find("/x")->size, 3u);
  EXPECT_EQ(set.find("/y"), nullptr);
  EXPECT_EQ(set.refusal("/y"), "not fetched by the original run run-1: /y");
}

TEST(FrozenSet, ContentTypesFollowTheUrlAndTheBytes) {
  EXPECT_EQ(frozen_content_type("/pypi/snapshot/c/simple/alpha/", "{\"meta\": {}}"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(frozen_content_type("/pypi/snapshot/c/simple/alpha/", "<!DOCTYPE html>"), "text/html; charset=utf-8");
  EXPECT_EQ(frozen_content_type("/pypi/snapshot/c/files/alpha/a.whl.metadata", "x"), "text/plain; charset=utf-8");
  EXPECT_EQ(frozen_content_type("/pypi/snapshot/c/files/alpha/a.whl", "PK"), "application/octet-stream");
  EXPECT_EQ(frozen_content_type("/maven/snapshot/c/g/a/1/a-1.pom", "<project/>"), "text/xml");
  EXPECT_EQ(frozen_content_type("/maven/snapshot/c/g/a/1/a-1.jar.sha1", "00"), "text/plain");
}

ProxyOptions mirror_options(const nlohmann::json& info, const std::filesystem::path& cache) {
  ProxyOptions options;
  options.cache_dir = cache;
  options.pypi_mirror = info.at("pypi_mirror").get<std::string>();
  options.maven_mirror = {info.at("maven_mirror").get<std::string>()};
  options.maven_publish_times = info.at("maven_publish_times").get<std::string>();
  options.workers = 4;
  return options;
}

TEST(FrozenListener, ServesTheOriginalsBytesWithoutItsUpstreamAndRefusesTheRestByName) {
  TempDir dir;
  nlohmann::json info;
  {
    FixtureUpstream fixture(dir.path() / "fixture", false);
    info = fixture.info();
  }
  const std::string page = "/pypi/snapshot/2022-07-01T00:00:00Z/simple/alpha/";
  const std::string wheel = "/pypi/snapshot/2022-07-01T00:00:00Z/files/alpha/alpha-1.1-py3-none-any.whl";
  const std::string pom = "/maven/snapshot/2022-07-01T00:00:00Z/org/capsule/fixture/lib/maven-metadata.xml";
  auto log = std::make_shared<ServedLog>();
  ServedProxy served(mirror_options(info, dir.path() / "cache"), {parse_cutoff("2022-07-01"), log});
  const auto original_page = served.get(page, {kJsonAccept});
  const auto original_wheel = served.get(wheel);
  const auto original_metadata = served.get(pom);
  ASSERT_EQ(original_page.status, 200u) << original_page.body;
  ASSERT_EQ(original_wheel.status, 200u);
  ASSERT_EQ(original_metadata.status, 200u) << original_metadata.body;

  nlohmann::json dependencies = nlohmann::json::array();
  for (const auto& object : log->objects()) {
    dependencies.push_back({{"url", object.url}, {"sha256", object.sha256}, {"size", object.size}});
  }
  // The upstream is gone: a frozen listener needs only the cache.
  std::filesystem::rename(dir.path() / "fixture", dir.path() / "fixture-gone");
  auto frozen = std::make_shared<const FrozenSet>(FrozenSet::from_dependencies("orig-1", dependencies));
  auto replay_log = std::make_shared<ServedLog>();
  const std::string base = served.add_listener({parse_cutoff("2022-07-01"), replay_log, frozen});
  const auto again_page = served.get_url(base + page);
  EXPECT_EQ(again_page.status, 200u);
  EXPECT_EQ(again_page.body, original_page.body) << "the page is the original's bytes, not a new rendering";
  EXPECT_EQ(again_page.headers.at("content-type"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(served.get_url(base + wheel).body, original_wheel.body);
  EXPECT_EQ(served.get_url(base + pom).body, original_metadata.body);
  EXPECT_EQ(replay_log->objects().size(), 3u);
  EXPECT_EQ(replay_log->objects().front().source, "frozen");

  const std::string other = "/pypi/snapshot/2022-07-01T00:00:00Z/simple/beta/";
  const auto refused = served.get_url(base + other);
  EXPECT_EQ(refused.status, 404u);
  EXPECT_NE(refused.body.find("not fetched by the original run orig-1: " + other), std::string::npos) << refused.body;
  EXPECT_EQ(replay_log->refused_json(), nlohmann::json::array({other}));
  EXPECT_EQ(served.get_url(base + "/pypi/snapshot/2024-01-01/simple/alpha/").status, 403u)
      << "a frozen listener still has its cutoff";

  // A blob gone from the cache is an error that says so, never other bytes.
  store::BlobStore blobs(dir.path() / "cache");
  ASSERT_TRUE(blobs.remove(store::Digest::from_hex(log->objects()[1].sha256)));
  const auto missing = served.get_url(base + wheel);
  EXPECT_EQ(missing.status, 500u);
  EXPECT_NE(missing.body.find("no longer in the proxy cache"), std::string::npos) << missing.body;
}

}  // namespace
}  // namespace capsule::proxy

// PageCache: pages round-trip byte-exact with their validators, are replaced atomically, refuse unsafe keys and
// treat a damaged file as not cached.
#include "http/error_status.h"
#include "proxy/cache/page_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "proxy/error.h"

namespace capsule::proxy {
namespace {

class PageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "page-cache-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

CachedPage sample_page() {
  CachedPage page;
  page.body = std::string("{\"name\": \"demo\"}\n\nline two\0binary\xff", 34);
  page.etag = "\"abc-123\"";
  page.last_serial = "98765";
  page.url = "https://pypi.org/simple/demo/";
  page.fetched_at = 1681171200123456;
  return page;
}

TEST_F(PageCacheTest, RoundTrip) {
  PageCache cache(dir_);
  EXPECT_EQ(cache.get("pypi-project", "demo"), std::nullopt);
  const CachedPage page = sample_page();
  cache.put("pypi-project", "demo", page);

  const std::optional<CachedPage> read = PageCache(dir_).get("pypi-project", "demo");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->body, page.body);
  EXPECT_EQ(read->etag, page.etag);
  EXPECT_EQ(read->last_serial, page.last_serial);
  EXPECT_EQ(read->url, page.url);
  EXPECT_EQ(read->fetched_at, page.fetched_at);
  EXPECT_EQ(cache.get("pypi-index", "demo"), std::nullopt) << "kinds are separate";
}

TEST_F(PageCacheTest, PutReplacesAndLeavesNoTemporaryFiles) {
  PageCache cache(dir_);
  CachedPage page = sample_page();
  cache.put("pypi-project", "demo", page);
  page.body = "new";
  page.etag.clear();
  cache.put("pypi-project", "demo", page);
  const auto read = cache.get("pypi-project", "demo");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->body, "new");
  EXPECT_EQ(read->etag, "");

  std::size_t files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_)) {
    if (entry.is_regular_file()) ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(PageCacheTest, RefusesUnsafeKeysAndKinds) {
  PageCache cache(dir_);
  for (const char* key : {"", "..", ".", "../demo", "a/b", ".hidden", "-demo", "de mo", "demo\n"}) {
    try {
      cache.put("pypi-project", key, sample_page());
      FAIL() << "accepted key '" << key << "'";
    } catch (const ProxyError& e) {
      EXPECT_EQ(capsule::http::status_for(e.code()), 400u);
      EXPECT_EQ(e.code(), "bad_cache_key");
    }
    EXPECT_THROW(cache.get("pypi-project", key), ProxyError) << key;
  }
  EXPECT_THROW(cache.get("../x", "demo"), ProxyError);
  EXPECT_THROW(cache.get("Pypi", "demo"), ProxyError);
  EXPECT_THROW(cache.get("", "demo"), ProxyError);
  EXPECT_NO_THROW(cache.put("maven-metadata", "org.apache.maven:maven-core", sample_page()));
  EXPECT_TRUE(cache.get("maven-metadata", "org.apache.maven:maven-core"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "pypi-project")) << "refused puts wrote nothing";
}

TEST_F(PageCacheTest, DamagedFileIsAMiss) {
  PageCache cache(dir_);
  cache.put("pypi-project", "demo", sample_page());
  const std::filesystem::path file = dir_ / "pypi-project" / "demo.page";
  ASSERT_TRUE(std::filesystem::exists(file));

  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 3);  // a truncated body
  EXPECT_EQ(cache.get("pypi-project", "demo"), std::nullopt);

  std::ofstream(file, std::ios::trunc) << "not json\nbody";
  EXPECT_EQ(cache.get("pypi-project", "demo"), std::nullopt);

  cache.put("pypi-project", "demo", sample_page());
  EXPECT_TRUE(cache.get("pypi-project", "demo"));
}

}  // namespace
}  // namespace capsule::proxy

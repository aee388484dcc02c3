// Routing and target decoding: patterns, parameters and literal precedence, 404/405 with Allow, percent- and
// query-decoding, and the targets that are refused.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "http/target.h"
#include "tests/http/http_test_support.h"

namespace capsule::http::test {
namespace {

TEST_F(HttpServerTest, PathParamsAndLiteralPrecedence) {
  start();
  EXPECT_EQ(request(get("/v1/runs/abc%2Fdef%20x/logs")).json_body(), json({{"id", "abc/def x"}}));
  EXPECT_EQ(request(get("/v1/runs/active/logs")).json_body(), json({{"literal", true}}));
}

TEST_F(HttpServerTest, QueryDecoding) {
  start();
  auto reply = request(get("/v1/query?state=running&label=a%20b&plus=1+2&flag&utf=%C3%A9&state=done"));
  EXPECT_EQ(reply.json_body(), json({{"state", "done"}, {"label", "a b"}, {"plus", "1 2"}, {"flag", ""}, {"utf", "é"}}));
}

TEST_F(HttpServerTest, NotFoundAndMethodNotAllowed) {
  start();
  auto missing = request(get("/v1/nothing/here"));
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.error_code(), "not_found");
  auto wrong = request("DELETE /v1/runs HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(wrong.status, 405u);
  EXPECT_EQ(wrong.error_code(), "method_not_allowed");
  EXPECT_EQ(wrong.headers["Allow"], "GET, POST");
}

TEST(HttpRouter, PatternsParamsAndErrors) {
  http::Router router;
  const auto noop = [](const http::Request&) { return http::Response{}; };
  router.add("GET", "/v1/images/{ref}", noop);
  router.add("DELETE", "/v1/images/{ref}", noop);
  router.add("GET", "/v1/images/{name}/tags", noop);
  EXPECT_THROW(router.add("GET", "/v1/images/{other}", noop), std::invalid_argument);
  EXPECT_THROW(router.add("GET", "v1/x", noop), std::invalid_argument);
  EXPECT_THROW(router.add("GET", "/v1/{a}x", noop), std::invalid_argument);
  EXPECT_THROW(router.add("GET", "/v1/{a}/{a}", noop), std::invalid_argument);
  EXPECT_EQ(router.routes(), (std::vector<std::pair<std::string, std::string>>{
                                 {"GET", "/v1/images/{ref}"}, {"DELETE", "/v1/images/{ref}"}, {"GET", "/v1/images/{name}/tags"}}));
  auto match = router.match("GET", {"v1", "images", "debian:12"});
  ASSERT_NE(match.handler, nullptr);
  EXPECT_EQ(match.params, (std::map<std::string, std::string>{{"ref", "debian:12"}}));
  auto not_allowed = router.match("PUT", {"v1", "images", "x"});
  ASSERT_TRUE(not_allowed.error);
  EXPECT_EQ(not_allowed.error->status, 405u);
  EXPECT_EQ(not_allowed.error->headers, (std::vector<std::pair<std::string, std::string>>{{"Allow", "DELETE, GET"}}));
  EXPECT_EQ(router.match("GET", {"v1"}).error->status, 404u);
}

TEST(HttpTarget, DecodesAndRejects) {
  auto target = http::parse_target("/a%2Fb/c+d?x=1+2&y=%41&z#frag");
  ASSERT_TRUE(target);
  EXPECT_EQ(target->path, "/a/b/c+d");
  EXPECT_EQ(target->segments, (std::vector<std::string>{"a/b", "c+d"}));
  EXPECT_EQ(target->query, (std::map<std::string, std::string>{{"x", "1 2"}, {"y", "A"}, {"z", ""}}));
  for (const char* bad : {"*", "http://host/x", "", "/a%00b", "/a%zz", "/a%4", "/x?y=%", "/a/../b", "/./a"}) {
    EXPECT_FALSE(http::parse_target(bad)) << bad;
  }
}

}  // namespace
}  // namespace capsule::http::test

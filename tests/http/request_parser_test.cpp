// What the request parser decides, through a live server and without a socket (parse_request_bytes): 400 for
// malformed requests, 501/505, the header and body limits (431, 413), chunked bodies and Expect: 100-continue.
#include <gtest/gtest.h>

#include <string>

#include "http/request_parser.h"
#include "tests/http/http_test_support.h"

namespace capsule::http::test {
namespace {

TEST_F(HttpServerTest, MalformedRequestsGet400AndClose) {
  start();
  for (const std::string bytes : {"GARBAGE\r\n\r\n", "GET /v1/hello HTTP/1.1\r\nBad Header\r\n\r\n",
                                  "GET /v1/hello HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                                  "POST /v1/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    RawClient client(socket_path_);
    client.send(bytes);
    auto reply = client.read();
    ASSERT_TRUE(reply) << bytes;
    EXPECT_EQ(reply->status, 400u) << bytes;
    EXPECT_EQ(reply->error_code(), "bad_request");
    EXPECT_TRUE(client.wait_closed()) << bytes;
  }
  auto bad_target = request(get("/v1/runs/%zz/logs"));
  EXPECT_EQ(bad_target.status, 400u);
  EXPECT_EQ(request(get("/v1/runs/../logs")).status, 400u);
}

TEST_F(HttpServerTest, UnsupportedTransferEncodingAndVersion) {
  start();
  auto gzip = request("POST /v1/echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(gzip.status, 501u);
  EXPECT_EQ(gzip.error_code(), "not_implemented");
  auto http12 = request("GET /v1/hello HTTP/2.0\r\n\r\n");
  EXPECT_EQ(http12.status, 505u) << http12.body;
}

TEST_F(HttpServerTest, HugeHeaderGets431) {
  start();
  auto reply = request(get("/v1/hello", "X-Big: " + std::string(20000, 'a') + "\r\n"));
  EXPECT_EQ(reply.status, 431u);
  EXPECT_EQ(reply.error_code(), "headers_too_large");
}

TEST_F(HttpServerTest, BigBodyGets413) {
  http::ServerOptions options;
  options.max_body_bytes = 1000;
  start(options);
  RawClient declared(socket_path_);
  declared.send("POST /v1/echo HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n");
  auto reply = declared.read();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 413u);
  EXPECT_EQ(reply->error_code(), "payload_too_large");
  EXPECT_TRUE(declared.wait_closed());

  std::string chunked = "POST /v1/echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) chunked += "190\r\n" + std::string(400, 'x') + "\r\n";
  EXPECT_EQ(request(chunked + "0\r\n\r\n").status, 413u);
}

TEST_F(HttpServerTest, ChunkedRequestBodyAndExpectContinue) {
  start();
  auto chunked = request("POST /v1/echo HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.json_body()["body"], json({{"a", 1}}));

  RawClient client(socket_path_);
  client.send("POST /v1/echo HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 7\r\nExpect: 100-continue\r\n\r\n");
  auto interim = client.read();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100u);
  client.send(R"({"b":2})");
  auto reply = client.read();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->json_body()["body"], json({{"b", 2}}));
}

TEST(HttpParseRequestBytes, SharesTheServerPipeline) {
  http::Router router;
  router.add("GET", "/v1/runs/{id}", [](const http::Request&) { return http::Response{}; });
  http::ServerOptions options;
  options.max_body_bytes = 10;
  EXPECT_FALSE(http::parse_request_bytes("GET /v1/runs/7 HTTP/1.1\r\nHost:", router, options).complete);
  auto ok = http::parse_request_bytes("GET /v1/runs/7?a=b HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\n\r\n", router, options);
  ASSERT_TRUE(ok.complete);
  ASSERT_NE(ok.handler, nullptr);
  EXPECT_EQ(ok.request.params.at("id"), "7");
  EXPECT_EQ(ok.request.headers.at("X-a"), "1, 2");
  EXPECT_EQ(ok.request.query.at("a"), "b");
  EXPECT_EQ(http::parse_request_bytes("POST /v1/runs/7 HTTP/1.1\r\nContent-Length: 11\r\n\r\n", router, options).error->status, 413u);
  EXPECT_EQ(http::parse_request_bytes("GET /nope HTTP/1.1\r\n\r\n", router, options).error->status, 404u);
  EXPECT_EQ(http::parse_request_bytes("GET /v1/runs/7 HTTP/1.1\r\nTransfer-Encoding: br\r\n\r\n", router, options).error->status, 501u);
}

}  // namespace
}  // namespace capsule::http::test

// One connection's cycle against a live server: JSON round trips with peer credentials (also via curl),
// deadlines, keep-alive and Connection: close, handler exceptions as error responses, and late answers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "tests/http/http_test_support.h"

namespace capsule::http::test {
namespace {

TEST_F(HttpServerTest, JsonRoundTripAndPeerCredentials) {
  start();
  auto hello = request(get("/v1/hello"));
  EXPECT_EQ(hello.status, 200u);
  EXPECT_EQ(hello.headers["Content-Type"], "application/json");
  EXPECT_EQ(hello.json_body(), json({{"hello", "world"}}));

  auto echo = request(post("/v1/echo", R"({"x":[1,2,3]})"));
  ASSERT_EQ(echo.status, 200u);
  const auto body = echo.json_body();
  EXPECT_EQ(body["body"], json({{"x", {1, 2, 3}}}));
  EXPECT_EQ(body["content_type"], "application/json");
  EXPECT_TRUE(body["peer"]["known"]);
  EXPECT_EQ(body["peer"]["uid"], getuid());
  EXPECT_EQ(body["peer"]["pid"], getpid());

  auto text = request(get("/v1/text"));
  EXPECT_EQ(text.status, 202u);
  EXPECT_EQ(text.headers["content-type"], "text/plain");
  EXPECT_EQ(text.headers["X-Capsule"], "yes");
  EXPECT_EQ(text.body, "plain");
}

TEST_F(HttpServerTest, CurlHappyPath) {
  start();
  const std::string command = "curl -sS --max-time 20 --unix-socket " + socket_path_ +
                              " -H 'Content-Type: application/json' --data '{\"from\":\"curl\"}'"
                              " -w '\\n%{http_code}' http://localhost/v1/echo 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char data[4096];
  while (const auto n = fread(data, 1, sizeof data, pipe)) output.append(data, n);
  ASSERT_EQ(pclose(pipe), 0) << output;
  const auto newline = output.rfind('\n');
  ASSERT_NE(newline, std::string::npos) << output;
  EXPECT_EQ(output.substr(newline + 1), "200");
  const auto body = json::parse(output.substr(0, newline));
  EXPECT_EQ(body["body"]["from"], "curl");
  EXPECT_EQ(body["peer"]["uid"], getuid());
}

TEST_F(HttpServerTest, SlowClientsAreTimedOut) {
  http::ServerOptions options;
  options.header_timeout = 300ms;
  options.body_timeout = 300ms;
  options.idle_timeout = 300ms;
  start(options);
  RawClient slow_header(socket_path_);
  slow_header.send("GET /v1/hello HTTP/1.1\r\nHost: x\r\n");
  auto reply = slow_header.read();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 408u);
  EXPECT_TRUE(slow_header.wait_closed());

  RawClient slow_body(socket_path_);
  slow_body.send("POST /v1/echo HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"a");
  reply = slow_body.read();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 408u);
  EXPECT_TRUE(slow_body.wait_closed());

  RawClient idle(socket_path_);
  idle.send(get("/v1/hello"));
  ASSERT_TRUE(idle.read());
  EXPECT_TRUE(idle.wait_closed());  // idle past idle_timeout: closed without a response
}

TEST_F(HttpServerTest, KeepAliveAndConnectionClose) {
  start();
  RawClient client(socket_path_);
  client.send(get("/v1/hello"));
  auto first = client.read();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200u);
  client.send(post("/v1/echo", "[1]"));
  auto second = client.read();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->json_body()["body"], json({1}));
  client.send(get("/v1/hello", "Connection: close\r\n"));
  auto third = client.read();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->headers["Connection"], "close");
  EXPECT_TRUE(client.wait_closed());

  RawClient old(socket_path_);
  old.send("GET /v1/hello HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(old.read());
  EXPECT_TRUE(old.wait_closed());
}

TEST_F(HttpServerTest, HandlerExceptionsBecomeErrorResponses) {
  start();
  RawClient client(socket_path_);
  client.send(get("/v1/api-error"));
  auto api = client.read();
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 409u);
  EXPECT_EQ(api->json_body(), json({{"error", {{"code", "conflict"}, {"message", "busy"}}}}));
  client.send(get("/v1/boom"));
  auto boom = client.read();
  ASSERT_TRUE(boom);
  EXPECT_EQ(boom->status, 500u);
  EXPECT_EQ(boom->error_code(), "internal_error");
  client.send(get("/v1/silent"));  // a handler that never answers
  auto silent = client.read();
  ASSERT_TRUE(silent);
  EXPECT_EQ(silent->status, 500u);
  client.send(get("/v1/hello"));  // the connection survived all three
  EXPECT_EQ(client.read().value_or(Reply{}).status, 200u);
}

TEST_F(HttpServerTest, AsyncResponseFromAnotherThread) {
  start();
  auto reply = request(get("/v1/later"));
  EXPECT_EQ(reply.status, 200u);
  EXPECT_EQ(reply.json_body(), json({{"later", true}}));
}

}  // namespace
}  // namespace capsule::http::test

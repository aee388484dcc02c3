// HttpServer over a temporary Unix socket, driven by a raw AF_UNIX client (exact bytes in, Beast-parsed replies
// out) and once by curl: routing, decoding, limits, timeouts, async and streamed answers, shutdown, and leaks.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "http/server.h"

namespace capsule::daemon {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using namespace std::chrono_literals;
using nlohmann::json;

struct Reply {
  unsigned status = 0;
  std::map<std::string, std::string, http::CaseInsensitiveLess> headers;
  std::string body;
  json json_body() const { return json::parse(body); }
  std::string error_code() const { return json_body()["error"]["code"].get<std::string>(); }
};

// A blocking AF_UNIX (or TCP, given a connected fd) client that sends exact bytes and parses replies with Beast.
class RawClient {
 public:
  explicit RawClient(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path.copy(address.sun_path, sizeof address.sun_path - 1);
    connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  }
  explicit RawClient(int connected_fd) : fd_(connected_fd), connected_(true) {}
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // One response, or nullopt on EOF or timeout first. Chunked body data goes to `on_chunk` when given.
  std::optional<Reply> read(const std::function<void(std::string_view)>& on_chunk = {}, std::chrono::milliseconds timeout = 10s) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    parser.eager(true);
    if (on_chunk) {
      chunk_callback_ = [&on_chunk](std::uint64_t, boost::beast::string_view data, boost::beast::error_code&) {
        on_chunk(std::string_view(data.data(), data.size()));
        return data.size();
      };
      parser.on_chunk_body(chunk_callback_);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!parser.is_done()) {
      if (!buffer_.empty()) {
        boost::beast::error_code ec;
        const auto used = parser.put(net::buffer(buffer_), ec);
        buffer_.erase(0, used);
        if (ec && ec != bhttp::error::need_more) return std::nullopt;
        if (parser.is_done()) break;
        if (used > 0 && !ec) continue;
      }
      if (!receive(deadline)) return std::nullopt;
    }
    Reply reply;
    reply.status = parser.get().result_int();
    for (const auto& field : parser.get()) reply.headers[std::string(field.name_string())] = std::string(field.value());
    reply.body = parser.get().body();
    return reply;
  }

  // True when the server closes the connection (EOF or reset) before the timeout; data is discarded.
  bool wait_closed(std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (receive(deadline)) buffer_.clear();
    return eof_;
  }

 private:
  bool receive(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd pfd{fd_, POLLIN, 0};
    if (left.count() <= 0 || poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    char data[65536];
    const auto n = recv(fd_, data, sizeof data, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(data, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
  std::function<std::size_t(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)> chunk_callback_;
};

std::string get(const std::string& target, const std::string& extra = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: capsule\r\n" + extra + "\r\n";
}
std::string post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: capsule\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/capsule-http-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    socket_path_ = dir_ + "/api.sock";
    router_.add("GET", "/v1/hello", [](const http::Request&) { return http::json_response(200, {{"hello", "world"}}); });
    router_.add("POST", "/v1/echo", [](const http::Request& request) {
      return http::json_response(200, {{"body", json::parse(request.body)},
                                 {"content_type", request.headers.at("content-type")},
                                 {"peer", {{"known", request.peer.known}, {"uid", request.peer.uid}, {"pid", request.peer.pid}}}});
    });
    router_.add("GET", "/v1/runs", [](const http::Request&) { return http::json_response(200, json::array()); });
    router_.add("POST", "/v1/runs", [](const http::Request&) { return http::json_response(201, json::object()); });
    router_.add("GET", "/v1/runs/{id}/logs", [](const http::Request& request) { return http::json_response(200, request.params); });
    router_.add("GET", "/v1/runs/active/logs", [](const http::Request&) { return http::json_response(200, {{"literal", true}}); });
    router_.add("GET", "/v1/query", [](const http::Request& request) { return http::json_response(200, request.query); });
    router_.add("GET", "/v1/text", [](const http::Request&) {
      return http::Response{202, "text/plain", "plain", {{"X-Capsule", "yes"}}};
    });
    router_.add("GET", "/v1/api-error", [](const http::Request&) -> http::Response { throw http::ApiError("conflict", "busy"); });
    router_.add("GET", "/v1/boom", [](const http::Request&) -> http::Response { throw std::runtime_error("kaboom"); });
    router_.add("GET", "/v1/silent", [](const http::Request&, http::Responder) {});
    router_.add("GET", "/v1/later", [this](const http::Request&, http::Responder responder) {
      helpers_.emplace_back([responder] {
        std::this_thread::sleep_for(100ms);
        responder.respond(http::json_response(200, {{"later", true}}));
      });
    });
    router_.add("GET", "/v1/hold", [this](const http::Request&, http::Responder responder) { held_.set_value(responder); });
  }

  void start(http::ServerOptions options = {}) {
    server_ = std::make_unique<http::HttpServer>(io_, router_, options);
    server_->listen_unix(socket_path_, 0660, std::nullopt);
    for (int i = 0; i < 2; ++i) io_threads_.emplace_back([this] { io_.run(); });
  }

  void TearDown() override {
    for (auto& helper : helpers_) helper.join();
    if (server_) server_->stop();
    if (server_) {
      EXPECT_TRUE(eventually([&] { return server_->active_connections() == 0; }));
    }
    io_.stop();
    for (auto& thread : io_threads_) thread.join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  Reply request(const std::string& bytes) {
    RawClient client(socket_path_);
    EXPECT_TRUE(client.connected());
    client.send(bytes);
    auto reply = client.read();
    EXPECT_TRUE(reply.has_value()) << bytes.substr(0, 200);
    return reply.value_or(Reply{});
  }

  http::Router router_;
  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_ = net::make_work_guard(io_);
  std::unique_ptr<http::HttpServer> server_;
  std::vector<std::thread> io_threads_;
  std::vector<std::thread> helpers_;  // touched only by handlers on the io threads before TearDown
  std::promise<http::Responder> held_;
  std::string dir_;
  std::string socket_path_;
};

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

TEST_F(HttpServerTest, StreamsChunkedNdjsonFromAnotherThread) {
  router_.add("GET", "/v1/stream", [this](const http::Request&, http::Responder responder) {
    auto writer = responder.start_stream(200, "application/x-ndjson");
    helpers_.emplace_back([writer] {
      for (int i = 0; i < 5; ++i) {
        writer->write(json({{"n", i}}).dump() + "\n");
        std::this_thread::sleep_for(20ms);
      }
      writer->finish();
    });
  });
  start();
  RawClient client(socket_path_);
  client.send(get("/v1/stream"));
  std::string streamed;
  int chunks = 0;
  auto reply = client.read([&](std::string_view data) {
    streamed += data;
    ++chunks;
  });
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->headers["Content-Type"], "application/x-ndjson");
  EXPECT_EQ(reply->headers["Transfer-Encoding"], "chunked");
  EXPECT_GE(chunks, 2);
  std::istringstream lines(streamed);
  std::string line;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(json::parse(line)["n"], i);
  }
  client.send(get("/v1/hello"));  // kept alive after the last chunk
  EXPECT_EQ(client.read().value_or(Reply{}).status, 200u);
}

TEST_F(HttpServerTest, StreamWriteFailsOnceTheClientIsGone) {
  std::promise<bool> noticed;
  router_.add("GET", "/v1/forever", [this, &noticed](const http::Request&, http::Responder responder) {
    auto writer = responder.start_stream(200, "application/x-ndjson");
    helpers_.emplace_back([writer, &noticed] {
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      bool gone = false;
      while (!gone && std::chrono::steady_clock::now() < deadline) {
        gone = !writer->write("{\"tick\":1}\n");
        std::this_thread::sleep_for(10ms);
      }
      noticed.set_value(gone && writer->client_gone());
    });
  });
  start();
  {
    RawClient client(socket_path_);
    client.send(get("/v1/forever"));
    std::promise<void> first;
    bool got = false;
    client.read([&](std::string_view) {
      if (!got) first.set_value();
      got = true;
    }, 1s);
    ASSERT_TRUE(got);
  }  // disconnect mid-stream
  auto result = noticed.get_future();
  ASSERT_EQ(result.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(result.get());
}

// A producer that writes its next piece only when the previous one was sent (StreamWriter::when_drained).
struct PacedProducer : std::enable_shared_from_this<PacedProducer> {
  std::shared_ptr<http::StreamWriter> writer;
  int left = 0;
  void next() {
    if (left-- == 0) return writer->finish();
    if (!writer->write(std::string(64 * 1024, static_cast<char>('a' + left % 26)))) return;
    writer->when_drained([self = shared_from_this()] { self->next(); });
  }
};

TEST_F(HttpServerTest, WhenDrainedPacesAProducerBelowTheBufferLimit) {
  std::weak_ptr<PacedProducer> endless;
  router_.add("GET", "/v1/paced", [](const http::Request& request, http::Responder responder) {
    auto producer = std::make_shared<PacedProducer>();
    producer->writer = responder.start_stream(200, "application/octet-stream");
    producer->left = std::stoi(request.query.at("pieces"));
    producer->next();
  });
  router_.add("GET", "/v1/endless", [&endless](const http::Request&, http::Responder responder) {
    auto producer = std::make_shared<PacedProducer>();
    producer->writer = responder.start_stream(200, "application/octet-stream");
    producer->left = -1;  // never ends
    endless = producer;
    producer->next();
  });
  http::ServerOptions options;
  options.max_stream_buffer_bytes = 256 * 1024;  // 4 pieces: 200 written at once would drop the client
  start(options);
  {
    RawClient client(socket_path_);
    client.send(get("/v1/paced?pieces=200"));
    std::size_t received = 0;
    auto reply = client.read([&](std::string_view data) { received += data.size(); }, 60s);
    ASSERT_TRUE(reply);
    EXPECT_EQ(received, 200u * 64 * 1024);
  }
  {
    RawClient client(socket_path_);  // never reads: the pending callback holds the producer
    client.send(get("/v1/endless"));
    ASSERT_TRUE(eventually([&] { return !endless.expired(); }));
  }  // gone: the connection closes and drops the callback, and with it the producer
  EXPECT_TRUE(eventually([&] { return endless.expired(); }, 40s)) << "the producer was kept after the client left";
}

TEST_F(HttpServerTest, SixtyFourConcurrentClients) {
  start();
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 64; ++c) {
    clients.emplace_back([&, c] {
      RawClient client(socket_path_);
      for (int i = 0; i < 5; ++i) {
        client.send(post("/v1/echo", json({{"c", c}, {"i", i}}).dump()));
        auto reply = client.read();
        if (reply && reply->status == 200 && reply->json_body()["body"] == json({{"c", c}, {"i", i}})) ++ok;
      }
    });
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(ok, 64 * 5);
  EXPECT_TRUE(eventually([&] { return server_->active_connections() == 0; }));
}

TEST_F(HttpServerTest, BusyConnectionsBeyondTheLimitGet503) {
  http::ServerOptions options;
  options.max_connections = 2;
  start(options);
  RawClient a(socket_path_), b(socket_path_);
  for (auto* client : {&a, &b}) client->send("GET /v1/hello HTTP/1.1\r\n");  // mid-header: busy, not idle
  ASSERT_TRUE(eventually([&] { return server_->active_connections() == 2; }));
  auto third = request(get("/v1/hello"));
  EXPECT_EQ(third.status, 503u);
  EXPECT_EQ(third.error_code(), "too_many_connections");
}

TEST_F(HttpServerTest, IdleKeptAliveConnectionsMakeRoomForNewOnes) {
  http::ServerOptions options;
  options.max_connections = 2;
  start(options);
  RawClient a(socket_path_), b(socket_path_);
  for (auto* client : {&a, &b}) {
    client->send(get("/v1/hello"));
    ASSERT_TRUE(client->read());
  }
  // Both wait for their next request: a newcomer closes one of them instead of being refused.
  EXPECT_EQ(request(get("/v1/hello")).status, 200u);
  EXPECT_TRUE(eventually([&] { return server_->active_connections() <= 2; }));
  int closed = 0;
  for (auto* client : {&a, &b}) closed += client->wait_closed(200ms) ? 1 : 0;
  EXPECT_EQ(closed, 1) << "exactly one idle connection made room";
}

// A connection made by a process running as `uid` (a forked child that connects and hands the socket over).
int connect_as(uid_t uid, const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -1;
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const pid_t child = fork();
  if (child == 0) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(1);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) _exit(2);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
    _exit(sendmsg(pair[1], &message, 0) == 1 ? 0 : 3);
  }
  ::close(pair[1]);
  int status = 0;
  waitpid(child, &status, 0);
  int fd = -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && recvmsg(pair[0], &message, 0) == 1) {
    std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&message)), sizeof fd);
  }
  ::close(pair[0]);
  return fd;
}

TEST_F(HttpServerTest, OneUserCannotHoldEveryConnection) {
  http::ServerOptions options;
  options.max_connections_per_uid = 2;
  start(options);
  ASSERT_EQ(chmod(dir_.c_str(), 0711), 0);
  ASSERT_EQ(chmod(socket_path_.c_str(), 0666), 0);
  constexpr uid_t kNobody = 65534;
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 2; ++i) {
    const int fd = connect_as(kNobody, socket_path_);
    ASSERT_GE(fd, 0);
    held.push_back(std::make_unique<RawClient>(fd));
    held.back()->send("GET /v1/hello HTTP/1.1\r\n");
  }
  ASSERT_TRUE(eventually([&] { return server_->active_connections() == 2; }));
  const int third_fd = connect_as(kNobody, socket_path_);
  ASSERT_GE(third_fd, 0);
  RawClient third(third_fd);
  third.send(get("/v1/hello"));
  const auto refused = third.read();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503u);
  EXPECT_EQ(refused->error_code(), "too_many_connections");
  EXPECT_NE(refused->body.find("uid 65534"), std::string::npos) << refused->body;
  EXPECT_EQ(request(get("/v1/hello")).status, 200u) << "another user still gets in";
}

TEST_F(HttpServerTest, SocketFileModeStaleAndLiveSockets) {
  // A leftover socket file nobody listens on is replaced.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  socket_path_.copy(address.sun_path, sizeof address.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ::close(fd);
  ASSERT_TRUE(std::filesystem::exists(socket_path_));
  start();
  EXPECT_EQ(request(get("/v1/hello")).status, 200u);

  struct stat st {};
  ASSERT_EQ(stat(socket_path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);

  http::HttpServer second(io_, router_);
  try {
    second.listen_unix(socket_path_, 0600, getgid());
    FAIL() << "a live socket was replaced";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("already listening"), std::string::npos) << e.what();
  }
  EXPECT_EQ(request(get("/v1/hello")).status, 200u);

  const std::string regular = dir_ + "/regular";
  std::ofstream(regular) << "not a socket";
  EXPECT_THROW(second.listen_unix(regular, 0600, std::nullopt), std::runtime_error);
  EXPECT_TRUE(std::filesystem::exists(regular));

  const std::string grouped = dir_ + "/grouped.sock";
  second.listen_unix(grouped, 0600, getgid());
  ASSERT_EQ(stat(grouped.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getgid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  second.stop();
  EXPECT_FALSE(std::filesystem::exists(grouped));
}

TEST_F(HttpServerTest, StopLetsInFlightResponsesFinish) {
  start();
  RawClient idle(socket_path_);
  idle.send(get("/v1/hello"));
  ASSERT_TRUE(idle.read());
  RawClient busy(socket_path_);
  busy.send(get("/v1/hold"));
  auto held = held_.get_future();
  ASSERT_EQ(held.wait_for(10s), std::future_status::ready);
  server_->stop();
  EXPECT_TRUE(idle.wait_closed());
  EXPECT_FALSE(std::filesystem::exists(socket_path_));
  EXPECT_FALSE(RawClient(socket_path_).connected());
  held.get().respond(http::json_response(200, {{"finished", true}}));
  auto reply = busy.read();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->json_body(), json({{"finished", true}}));
  EXPECT_EQ(reply->headers["Connection"], "close");
  EXPECT_TRUE(busy.wait_closed());
}

TEST_F(HttpServerTest, LoopbackTcpListener) {
  start();
  EXPECT_THROW(server_->listen_tcp("0.0.0.0", 0), std::invalid_argument);
  const auto port = server_->listen_tcp("127.0.0.1", 0);
  ASSERT_NE(port, 0);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  RawClient client(fd);
  client.send(post("/v1/echo", "{}"));
  auto reply = client.read();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->json_body()["peer"]["known"], false);
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
}  // namespace capsule::daemon

// HttpClient against scripted HTTP and HTTPS servers on 127.0.0.1: keep-alive and stale connections, chunked
// and streamed bodies, retries, timeouts, redirects, size limits, certificate and host name verification.
#include "http/error_status.h"
#include "proxy/upstream/http_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "proxy/error.h"
#include "tests/proxy/upstream_test_server.h"

namespace capsule::proxy {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using std::chrono::milliseconds;
using testing::error_of;

struct SeenRequest {
  std::string method;
  std::string target;
  HttpHeaders headers;
  int connection = 0;  // accept order, from 1
  int index = 0;       // order on its connection, from 1
};

struct Reply {
  enum class Then { keep_open, close, hang };
  std::string bytes;  // written as is: a whole response, part of one, or nothing
  Then then = Then::keep_open;
};

// Answers each request with the handler's Reply, one thread per connection, plain or TLS. The destructor shuts
// every socket down and joins every thread.
class ScriptedServer {
 public:
  using Handler = std::function<Reply(const SeenRequest&)>;

  explicit ScriptedServer(Handler handler, ssl::context* tls = nullptr)
      : handler_(std::move(handler)), tls_(tls), acceptor_(ioc_, {net::ip::make_address("127.0.0.1"), 0}) {
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~ScriptedServer() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);  // wakes accept()
    accept_thread_.join();
    for (auto& thread : threads_) thread.join();
  }

  ScriptedServer(const ScriptedServer&) = delete;
  ScriptedServer& operator=(const ScriptedServer&) = delete;

  std::string url(const std::string& path, const std::string& host = "127.0.0.1") const {
    return std::string(tls_ ? "https://" : "http://") + host + ":" + std::to_string(acceptor_.local_endpoint().port()) +
           path;
  }
  int connections() const { return connections_; }
  std::vector<SeenRequest> requests() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  void accept_loop() {
    for (;;) {
      tcp::socket socket(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      std::lock_guard lock(mutex_);
      if (ec || stopping_) return;
      const int number = ++connections_;
      open_fds_.insert(socket.native_handle());
      threads_.emplace_back([this, number, s = std::move(socket)]() mutable { serve(std::move(s), number); });
    }
  }

  void serve(tcp::socket socket, int number) {
    const int fd = socket.native_handle();
    if (tls_) {
      ssl::stream<tcp::socket&> stream(socket, *tls_);
      boost::system::error_code ec;
      stream.handshake(ssl::stream_base::server, ec);
      if (!ec) converse(stream, number);
    } else {
      converse(socket, number);
    }
    std::lock_guard lock(mutex_);
    open_fds_.erase(fd);  // before the socket closes, so the destructor never shuts down a reused fd
  }

  template <class Stream>
  void converse(Stream& stream, int connection) {
    std::string pending;
    for (int index = 1;; ++index) {
      boost::system::error_code ec;
      const std::size_t end = net::read_until(stream, net::dynamic_buffer(pending), "\r\n\r\n", ec);
      if (ec) return;
      SeenRequest request = parse(pending.substr(0, end));
      pending.erase(0, end);
      request.connection = connection;
      request.index = index;
      {
        std::lock_guard lock(mutex_);
        seen_.push_back(request);
      }
      const Reply reply = handler_(request);
      if (reply.then == Reply::Then::hang) continue;  // the next read ends when the client gives up
      if (!reply.bytes.empty()) net::write(stream, net::buffer(reply.bytes), ec);
      if (ec || reply.then == Reply::Then::close) return;
    }
  }

  static SeenRequest parse(const std::string& head) {
    SeenRequest request;
    std::size_t line_end = head.find("\r\n");
    const std::string line = head.substr(0, line_end);
    request.method = line.substr(0, line.find(' '));
    request.target = line.substr(request.method.size() + 1, line.rfind(' ') - request.method.size() - 1);
    for (std::size_t start = line_end + 2; start < head.size(); start = line_end + 2) {
      line_end = head.find("\r\n", start);
      const std::string field = head.substr(start, line_end - start);
      const auto colon = field.find(':');
      if (colon == std::string::npos) continue;
      request.headers[field.substr(0, colon)] = field.substr(field.find_first_not_of(' ', colon + 1));
    }
    return request;
  }

  Handler handler_;
  ssl::context* tls_;
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  mutable std::mutex mutex_;
  bool stopping_ = false;
  std::set<int> open_fds_;
  std::vector<std::thread> threads_;
  std::vector<SeenRequest> seen_;
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
};

std::string response(unsigned status, const std::string& body, const std::string& extra_headers = "") {
  return "HTTP/1.1 " + std::to_string(status) + " Scripted\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         extra_headers + "\r\n" + body;
}

std::string redirect(unsigned status, const std::string& location) {
  return response(status, "", "Location: " + location + "\r\n");
}

HttpClientOptions fast_options() {
  HttpClientOptions options;
  options.connect_timeout = milliseconds(2000);
  options.request_timeout = milliseconds(5000);
  options.initial_backoff = milliseconds(1);
  options.max_backoff = milliseconds(5);
  options.user_agent = "capsule-test";
  return options;
}

TEST(HttpClient, GetSendsHeadersAndJoinsRepeatedResponseFields) {
  ScriptedServer server([](const SeenRequest&) {
    return Reply{response(200, "hello", "Set-Thing: a\r\nset-thing: b\r\nETag: \"v1\"\r\n")};
  });
  HttpClient client(fast_options());
  const HttpResponse got = client.get(server.url("/simple/demo/?x=1#frag"), {{"Accept", "application/json"}});
  EXPECT_EQ(got.status, 200u);
  EXPECT_EQ(got.body, "hello");
  EXPECT_EQ(got.headers.at("SET-THING"), "a, b");
  EXPECT_EQ(got.headers.at("etag"), "\"v1\"");
  EXPECT_EQ(got.url, server.url("/simple/demo/?x=1"));

  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].target, "/simple/demo/?x=1");
  EXPECT_EQ(seen[0].headers.at("host"), server.url("").substr(7));
  EXPECT_EQ(seen[0].headers.at("user-agent"), "capsule-test");
  EXPECT_EQ(seen[0].headers.at("accept-encoding"), "identity");
  EXPECT_EQ(seen[0].headers.at("accept"), "application/json");

  client.get(server.url("/"), {{"User-Agent", "caller"}});
  EXPECT_EQ(server.requests().at(1).headers.at("user-agent"), "caller");
  EXPECT_THROW(client.get(server.url("/"), {{"X-Bad", "a\r\nInjected: 1"}}), std::invalid_argument);
}

TEST(HttpClient, HeadReadsNoBodyAndKeepsTheConnection) {
  ScriptedServer server([](const SeenRequest& request) {
    if (request.method == "HEAD") {
      return Reply{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nLast-Modified: Tue, 11 Apr 2023 00:00:00 GMT\r\n\r\n"};
    }
    return Reply{response(200, "after")};
  });
  HttpClient client(fast_options());
  const HttpResponse head = client.head(server.url("/a.pom"));
  EXPECT_EQ(head.status, 200u);
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(head.headers.at("content-length"), "5");
  EXPECT_EQ(head.headers.at("last-modified"), "Tue, 11 Apr 2023 00:00:00 GMT");
  EXPECT_EQ(client.get(server.url("/next")).body, "after");
  EXPECT_EQ(server.requests().at(0).method, "HEAD");
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClient, ReusesKeptAliveConnections) {
  ScriptedServer server([](const SeenRequest& request) { return Reply{response(200, request.target)}; });
  HttpClient client(fast_options());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(client.get(server.url("/" + std::to_string(i))).body, "/" + std::to_string(i));
  EXPECT_EQ(client.connections_opened(), 1u);
  EXPECT_EQ(client.requests_sent(), 5u);
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests().at(4).index, 5);
}

TEST(HttpClient, DoesNotReuseAConnectionTheServerAskedToClose) {
  ScriptedServer server([](const SeenRequest&) { return Reply{response(200, "x", "Connection: close\r\n")}; });
  HttpClient client(fast_options());
  client.get(server.url("/1"));
  client.get(server.url("/2"));
  EXPECT_EQ(client.connections_opened(), 2u);
  EXPECT_EQ(server.connections(), 2);
}

TEST(HttpClient, ReplacesAPooledConnectionTheServerClosedWhileIdle) {
  ScriptedServer server([](const SeenRequest& request) {
    return Reply{response(200, request.target), Reply::Then::close};  // keep-alive promised, then closed
  });
  auto options = fast_options();
  options.max_attempts = 1;
  HttpClient client(options);
  EXPECT_EQ(client.get(server.url("/1")).body, "/1");
  EXPECT_EQ(client.get(server.url("/2")).body, "/2");
  EXPECT_EQ(client.connections_opened(), 2u);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClient, RetriesOnceTransparentlyWhenAPooledConnectionDiesUnderARequest) {
  ScriptedServer server([](const SeenRequest& request) {
    if (request.connection == 1 && request.index == 2) return Reply{"", Reply::Then::close};
    return Reply{response(200, request.target)};
  });
  auto options = fast_options();
  options.max_attempts = 1;  // the replacement is not an attempt: a counted one would have thrown
  HttpClient client(options);
  EXPECT_EQ(client.get(server.url("/1")).body, "/1");
  EXPECT_EQ(client.get(server.url("/2")).body, "/2");
  EXPECT_EQ(client.connections_opened(), 2u);
  EXPECT_EQ(client.requests_sent(), 3u);
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].connection, 2);
  EXPECT_EQ(seen[2].target, "/2");
}

TEST(HttpClient, AFreshConnectionClosedWithoutAnAnswerIsAFailedAttempt) {
  ScriptedServer server([](const SeenRequest&) { return Reply{"", Reply::Then::close}; });
  auto options = fast_options();
  options.max_attempts = 2;
  HttpClient client(options);
  const ProxyError error = error_of([&] { client.get(server.url("/x")); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
  EXPECT_EQ(error.code(), "upstream_unavailable");
  EXPECT_NE(error.cause().detail.find("attempt 2 of 2"), std::string::npos) << error.cause().detail;
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClient, ReadsChunkedBodies) {
  ScriptedServer server([](const SeenRequest&) {
    return Reply{
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-Trailer: t\r\n\r\n"};
  });
  HttpClient client(fast_options());
  EXPECT_EQ(client.get(server.url("/chunked")).body, "hello world!");
  EXPECT_EQ(client.get(server.url("/again")).body, "hello world!");
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClient, ReadsABodyThatEndsWithTheConnection) {
  ScriptedServer server([](const SeenRequest&) {
    return Reply{"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end", Reply::Then::close};
  });
  HttpClient client(fast_options());
  EXPECT_EQ(client.get(server.url("/eof")).body, "until the end");
}

std::string pattern(std::size_t size) {
  std::string text(size, '\0');
  for (std::size_t i = 0; i < size; ++i) text[i] = static_cast<char>('a' + (i * 7) % 26);
  return text;
}

TEST(HttpClient, GetToStreamsA200BodyInChunks) {
  const std::string big = pattern(300000);
  ScriptedServer server([&big](const SeenRequest& request) {
    if (request.target == "/missing") return Reply{response(404, "no such file")};
    return Reply{response(200, big)};
  });
  HttpClient client(fast_options());
  std::string received;
  int calls = 0;
  const BodySink sink = [&](const char* data, std::size_t size) {
    received.append(data, size);
    ++calls;
  };
  const HttpResponse got = client.get_to(server.url("/file.whl"), sink);
  EXPECT_EQ(got.status, 200u);
  EXPECT_EQ(got.body, "");
  EXPECT_EQ(received, big);
  EXPECT_GT(calls, 1);

  received.clear();
  const HttpResponse missing = client.get_to(server.url("/missing"), sink);
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(missing.body, "no such file");
  EXPECT_EQ(received, "");
  EXPECT_EQ(client.connections_opened(), 1u);
}

TEST(HttpClient, GetToRefusesToRetryOnceBytesReachedTheSink) {
  const std::string half = pattern(100000);
  ScriptedServer server([&half](const SeenRequest&) {
    return Reply{"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + half, Reply::Then::close};
  });
  auto options = fast_options();
  options.max_attempts = 3;
  HttpClient client(options);
  std::string received;
  const ProxyError error = error_of([&] {
    client.get_to(server.url("/cut.jar"), [&](const char* data, std::size_t size) { received.append(data, size); });
  });
  EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
  EXPECT_NE(error.cause().detail.find("not retried"), std::string::npos) << error.cause().detail;
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_FALSE(received.empty());
  EXPECT_EQ(received, half.substr(0, received.size()));
}

TEST(HttpClient, Retries503ThenSucceeds) {
  std::atomic<int> calls{0};
  ScriptedServer server(
      [&calls](const SeenRequest&) { return Reply{++calls == 1 ? response(503, "busy") : response(200, "done")}; });
  HttpClient client(fast_options());
  std::string streamed;
  const HttpResponse got =
      client.get_to(server.url("/f"), [&](const char* data, std::size_t size) { streamed.append(data, size); });
  EXPECT_EQ(got.status, 200u);
  EXPECT_EQ(streamed, "done");  // the 503's body never reached the sink
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(client.requests_sent(), 2u);
}

TEST(HttpClient, Honours429RetryAfter) {
  std::atomic<int> calls{0};
  ScriptedServer server([&calls](const SeenRequest&) {
    const int call = ++calls;
    if (call == 1) return Reply{response(429, "", "Retry-After: 0\r\n")};
    if (call == 2) return Reply{response(429, "", "Retry-After: 3600\r\n")};  // capped at max_backoff
    if (call == 3) return Reply{response(503, "", "Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n")};
    return Reply{response(200, "ok")};
  });
  HttpClient client(fast_options());
  EXPECT_EQ(client.get(server.url("/x")).status, 200u);
  EXPECT_EQ(server.requests().size(), 4u);
}

TEST(HttpClient, ReturnsTheLast5xxWhenAttemptsRunOut) {
  ScriptedServer server([](const SeenRequest&) { return Reply{response(502, "bad gateway")}; });
  auto options = fast_options();
  options.max_attempts = 3;
  HttpClient client(options);
  const HttpResponse got = client.get(server.url("/x"));
  EXPECT_EQ(got.status, 502u);
  EXPECT_EQ(got.body, "bad gateway");
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(HttpClient, DoesNotRetry404) {
  ScriptedServer server([](const SeenRequest&) { return Reply{response(404, "")}; });
  HttpClient client(fast_options());
  EXPECT_EQ(client.get(server.url("/x")).status, 404u);
  EXPECT_EQ(server.requests().size(), 1u);
}

unsigned short unused_port() {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, {net::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

TEST(HttpClient, ConnectionRefusedIs502) {
  auto options = fast_options();
  options.max_attempts = 2;
  HttpClient client(options);
  const std::string url = "http://127.0.0.1:" + std::to_string(unused_port()) + "/simple/";
  const ProxyError error = error_of([&] { client.get(url); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
  EXPECT_EQ(error.code(), "upstream_unavailable");
  EXPECT_EQ(error.cause().path, url);
  EXPECT_NE(error.cause().detail.find("refused"), std::string::npos) << error.cause().detail;
  EXPECT_EQ(client.connections_opened(), 0u);
}

TEST(HttpClient, RefusesUrlsThatAreNotHttp) {
  HttpClient client(fast_options());
  const ProxyError error = error_of([&] { client.get("ftp://127.0.0.1/x"); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
  EXPECT_EQ(error.cause().path, "ftp://127.0.0.1/x");
}

TEST(HttpClient, AServerThatNeverAnswersIs504) {
  ScriptedServer server([](const SeenRequest&) { return Reply{"", Reply::Then::hang}; });
  auto options = fast_options();
  options.request_timeout = milliseconds(300);
  options.max_attempts = 2;
  HttpClient client(options);
  const ProxyError error = error_of([&] { client.get(server.url("/slow")); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 504u);
  EXPECT_EQ(error.code(), "upstream_timeout");
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClient, AHalfSentBodyTimesOutToo) {
  ScriptedServer server([](const SeenRequest&) {
    return Reply{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial", Reply::Then::hang};
  });
  auto options = fast_options();
  options.request_timeout = milliseconds(300);
  options.max_attempts = 1;
  HttpClient client(options);
  EXPECT_EQ(capsule::http::status_for(error_of([&] { client.get(server.url("/slow")); }).code()), 504u);
}

// A listener that never accepts, with its queue already full: the kernel drops further SYNs.
TEST(HttpClient, AConnectThatNeverCompletesIs504) {
  net::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::v4());
  acceptor.bind({net::ip::make_address("127.0.0.1"), 0});
  acceptor.listen(0);
  std::vector<tcp::socket> fillers;  // non-blocking connects, started and left pending
  for (int i = 0; i < 3; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    fillers.emplace_back(ioc, tcp::v4(), fd);
    const auto target = acceptor.local_endpoint();
    ::connect(fd, target.data(), static_cast<socklen_t>(target.size()));
  }
  auto options = fast_options();
  options.connect_timeout = milliseconds(300);
  options.max_attempts = 1;
  HttpClient client(options);
  const ProxyError error =
      error_of([&] { client.get("http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()) + "/"); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 504u);
  EXPECT_NE(error.cause().detail.find("connect"), std::string::npos) << error.cause().detail;
}

TEST(HttpClient, FollowsRelativeAndAbsoluteRedirects) {
  ScriptedServer other([](const SeenRequest& request) { return Reply{response(200, "other " + request.target)}; });
  ScriptedServer server([&other](const SeenRequest& request) {
    if (request.target == "/a/start") return Reply{redirect(302, "../b/target?x=1#frag")};
    if (request.target == "/abs") return Reply{redirect(301, other.url("/there"))};
    if (request.target == "/see-other") return Reply{redirect(303, "/a/start")};
    return Reply{response(200, "here " + request.target)};
  });
  HttpClient client(fast_options());
  HttpResponse got = client.get(server.url("/a/start"));
  EXPECT_EQ(got.status, 200u);
  EXPECT_EQ(got.body, "here /b/target?x=1");
  EXPECT_EQ(got.url, server.url("/b/target?x=1"));

  got = client.head(server.url("/abs"));
  EXPECT_EQ(got.status, 200u);
  EXPECT_EQ(got.url, other.url("/there"));
  EXPECT_EQ(other.requests().at(0).method, "HEAD");

  std::string streamed;
  got =
      client.get_to(server.url("/see-other"), [&](const char* data, std::size_t size) { streamed.append(data, size); });
  EXPECT_EQ(streamed, "here /b/target?x=1");
  EXPECT_EQ(got.body, "");
}

TEST(HttpClient, ARedirectLoopIsAnError) {
  ScriptedServer server(
      [](const SeenRequest& request) { return Reply{redirect(307, request.target == "/ping" ? "/pong" : "/ping")}; });
  auto options = fast_options();
  options.max_redirects = 3;
  HttpClient client(options);
  const ProxyError error = error_of([&] { client.get(server.url("/ping")); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
  EXPECT_NE(error.cause().detail.find("redirects"), std::string::npos) << error.cause().detail;
  EXPECT_EQ(server.requests().size(), 4u);  // the first request and three redirects
}

TEST(HttpClient, ARedirectWithoutLocationIsReturned) {
  ScriptedServer server([](const SeenRequest&) { return Reply{response(302, "nowhere")}; });
  HttpClient client(fast_options());
  const HttpResponse got = client.get(server.url("/x"));
  EXPECT_EQ(got.status, 302u);
  EXPECT_EQ(got.body, "nowhere");
}

TEST(HttpClient, EnforcesMaxBodyBytes) {
  ScriptedServer server([](const SeenRequest& request) {
    if (request.target == "/ten") return Reply{response(200, "0123456789")};
    if (request.target == "/eleven") return Reply{response(200, "0123456789A")};
    return Reply{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n89ABCDEF\r\n0\r\n\r\n"};
  });
  auto options = fast_options();
  options.max_body_bytes = 10;
  HttpClient client(options);
  EXPECT_EQ(client.get(server.url("/ten")).body, "0123456789");
  for (const char* path : {"/eleven", "/chunked"}) {
    const ProxyError error = error_of([&] { client.get(server.url(path)); });
    EXPECT_EQ(capsule::http::status_for(error.code()), 502u) << path;
    EXPECT_EQ(error.code(), "upstream_too_large") << path;
  }
  std::string streamed;
  const ProxyError error = error_of([&] {
    client.get_to(server.url("/eleven"), [&](const char* data, std::size_t size) { streamed.append(data, size); });
  });
  EXPECT_EQ(error.code(), "upstream_too_large");
  EXPECT_EQ(streamed, "");
  EXPECT_EQ(server.requests().size(), 4u);  // never retried
}

TEST(HttpClient, ServesManyThreadsAtOnce) {
  ScriptedServer server([](const SeenRequest& request) { return Reply{response(200, request.target)}; });
  HttpClient client(fast_options());
  std::atomic<int> correct{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&client, &server, &correct, t] {
      for (int i = 0; i < 10; ++i) {
        const std::string path = "/" + std::to_string(t) + "/" + std::to_string(i);
        if (client.get(server.url(path)).body == path) ++correct;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(correct.load(), 40);
  EXPECT_EQ(server.requests().size(), 40u);
  EXPECT_LE(client.connections_opened(), 4u);
}

std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count;
}

TEST(HttpClient, ClosesPooledConnectionsWhenDestroyed) {
  const std::size_t before = open_fd_count();
  {
    ScriptedServer server([](const SeenRequest&) { return Reply{response(200, "x")}; });
    HttpClient client(fast_options());
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) threads.emplace_back([&client, &server] { client.get(server.url("/")); });
    for (auto& thread : threads) thread.join();
    EXPECT_GE(client.connections_opened(), 1u);
  }
  EXPECT_EQ(open_fd_count(), before);
}

// A throwaway CA and server certificates made with the openssl command line, shared by the TLS tests.
class HttpClientTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern_text = (std::filesystem::temp_directory_path() / "capsule-httpc-XXXXXX").string();
    if (!::mkdtemp(pattern_text.data())) {
      setup_error_ = "mkdtemp failed";
      return;
    }
    dir_ = pattern_text;
    std::ofstream(dir_ / "ca.cnf") << "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = capsule test CA\n"
                                      "[ca_ext]\nbasicConstraints = critical,CA:TRUE\n"
                                      "keyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n";
    const std::string d = "'" + dir_.string() + "/";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    if (!run("openssl req -x509 -new -config " + d + "ca.cnf' -extensions ca_ext" + key + " -keyout " + d +
             "ca.key' -out " + d + "ca.pem' -days 2") ||
        !make_server_cert("good", "IP:127.0.0.1,DNS:localhost", d, key) ||
        !make_server_cert("other", "DNS:other.example", d, key)) {
      setup_error_ = "openssl could not make the test certificates";
    }
  }

  static void TearDownTestSuite() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static bool run(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()) == 0; }

  static bool make_server_cert(const std::string& name, const std::string& names, const std::string& d,
                               const std::string& key) {
    std::ofstream(dir_ / (name + ".ext")) << "subjectAltName = " << names << "\n";
    return run("openssl req -new -subj /CN=" + name + key + " -keyout " + d + name + ".key' -out " + d + name +
               ".csr'") &&
           run("openssl x509 -req -in " + d + name + ".csr' -CA " + d + "ca.pem' -CAkey " + d +
               "ca.key' -CAcreateserial -days 2 -out " + d + name + ".pem' -extfile " + d + name + ".ext'");
  }

  static ssl::context server_context(const std::string& name) {
    ssl::context context(ssl::context::tls_server);
    context.use_certificate_chain_file((dir_ / (name + ".pem")).string());
    context.use_private_key_file((dir_ / (name + ".key")).string(), ssl::context::pem);
    return context;
  }

  static HttpClientOptions trusting_options() {
    auto options = fast_options();
    options.ca_file = (dir_ / "ca.pem").string();
    return options;
  }

  static inline std::filesystem::path dir_;
  static inline std::string setup_error_;
};

TEST_F(HttpClientTls, TrustedCertificateByIpAndByName) {
  auto context = server_context("good");
  ScriptedServer server([](const SeenRequest& request) { return Reply{response(200, "secure " + request.target)}; },
                        &context);
  HttpClient client(trusting_options());
  EXPECT_EQ(client.get(server.url("/ip")).body, "secure /ip");
  EXPECT_EQ(client.get(server.url("/ip2")).body, "secure /ip2");
  EXPECT_EQ(client.connections_opened(), 1u);
  const HttpResponse by_name = client.get(server.url("/name", "localhost"));
  EXPECT_EQ(by_name.body, "secure /name");
  EXPECT_EQ(client.connections_opened(), 2u);  // another host, another pool entry
}

TEST_F(HttpClientTls, UntrustedCertificateIs502) {
  auto context = server_context("good");
  ScriptedServer server([](const SeenRequest&) { return Reply{response(200, "never")}; }, &context);
  HttpClient client(fast_options());  // default verify paths do not hold the test CA
  const ProxyError error = error_of([&] { client.get(server.url("/")); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
  EXPECT_EQ(error.code(), "upstream_unavailable");
  EXPECT_NE(error.cause().detail.find("certificate verification failed"), std::string::npos) << error.cause().detail;
  EXPECT_EQ(server.requests().size(), 0u);
}

TEST_F(HttpClientTls, CertificateForAnotherHostIs502) {
  auto context = server_context("other");
  ScriptedServer server([](const SeenRequest&) { return Reply{response(200, "never")}; }, &context);
  HttpClient client(trusting_options());
  for (const char* host : {"127.0.0.1", "localhost"}) {
    const ProxyError error = error_of([&] { client.get(server.url("/", host)); });
    EXPECT_EQ(capsule::http::status_for(error.code()), 502u) << host;
    EXPECT_NE(error.cause().detail.find("certificate verification failed"), std::string::npos) << error.cause().detail;
    EXPECT_NE(error.cause().detail.find("mismatch"), std::string::npos) << error.cause().detail;
  }
  EXPECT_EQ(server.requests().size(), 0u);
}

TEST_F(HttpClientTls, RefusesARedirectFromHttpsToHttp) {
  ScriptedServer plain([](const SeenRequest&) { return Reply{response(200, "downgraded")}; });
  auto context = server_context("good");
  ScriptedServer server([&plain](const SeenRequest&) { return Reply{redirect(302, plain.url("/x"))}; }, &context);
  HttpClient client(trusting_options());
  const ProxyError error = error_of([&] { client.get(server.url("/")); });
  EXPECT_EQ(capsule::http::status_for(error.code()), 502u);
  EXPECT_NE(error.cause().detail.find("https to http"), std::string::npos) << error.cause().detail;
  EXPECT_EQ(plain.requests().size(), 0u);
}

TEST_F(HttpClientTls, AnUnreadableCaFileIsReported) {
  auto options = fast_options();
  options.ca_file = (dir_ / "missing.pem").string();
  const ProxyError error = error_of([&] { HttpClient client(options); });
  EXPECT_EQ(error.code(), "bad_ca_file");
  EXPECT_EQ(error.cause().path, options.ca_file);
}

}  // namespace
}  // namespace capsule::proxy

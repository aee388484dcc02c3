// The shared client, request builders and HttpServerTest fixture declared in tests/http/http_test_support.h.
// The fixture's routes cover what every suite needs, so each test only starts the server with its options.
#include "tests/http/http_test_support.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/beast/http.hpp>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace capsule::http::test {

namespace bhttp = boost::beast::http;

RawClient::RawClient(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  connected_ = connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
}

void RawClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawClient::send(std::string_view bytes) {
  while (!bytes.empty()) {
    const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::optional<Reply> RawClient::read(const std::function<void(std::string_view)>& on_chunk, std::chrono::milliseconds timeout) {
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

bool RawClient::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (receive(deadline)) buffer_.clear();
  return eof_;
}

bool RawClient::receive(std::chrono::steady_clock::time_point deadline) {
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

std::string get(const std::string& target, const std::string& extra) {
  return "GET " + target + " HTTP/1.1\r\nHost: capsule\r\n" + extra + "\r\n";
}
std::string post(const std::string& target, const std::string& body) {
  return "POST " + target + " HTTP/1.1\r\nHost: capsule\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

void HttpServerTest::SetUp() {
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

void HttpServerTest::start(http::ServerOptions options) {
  server_ = std::make_unique<http::HttpServer>(io_, router_, options);
  server_->listen_unix(socket_path_, 0660, std::nullopt);
  for (int i = 0; i < 2; ++i) io_threads_.emplace_back([this] { io_.run(); });
}

void HttpServerTest::TearDown() {
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

Reply HttpServerTest::request(const std::string& bytes) {
  RawClient client(socket_path_);
  EXPECT_TRUE(client.connected());
  client.send(bytes);
  auto reply = client.read();
  EXPECT_TRUE(reply.has_value()) << bytes.substr(0, 200);
  return reply.value_or(Reply{});
}

}  // namespace capsule::http::test

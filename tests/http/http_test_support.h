// What the http/ suites share: a raw AF_UNIX/TCP client that sends exact bytes and parses replies with Beast,
// request builders, and HttpServerTest, a server with a set of test routes on a temporary Unix socket.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "http/request.h"
#include "http/responder.h"
#include "http/response.h"
#include "http/router.h"
#include "http/server.h"

namespace capsule::http::test {

namespace net = boost::asio;
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
  explicit RawClient(const std::string& path);
  explicit RawClient(int connected_fd) : fd_(connected_fd), connected_(true) {}
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  void close();
  bool send(std::string_view bytes);
  // One response, or nullopt on EOF or timeout first. Chunked body data goes to `on_chunk` when given.
  std::optional<Reply> read(const std::function<void(std::string_view)>& on_chunk = {},
                            std::chrono::milliseconds timeout = 10s);
  // True when the server closes the connection (EOF or reset) before the timeout; data is discarded.
  bool wait_closed(std::chrono::milliseconds timeout = 10s);

 private:
  bool receive(std::chrono::steady_clock::time_point deadline);

  int fd_;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
  std::function<std::size_t(std::uint64_t, boost::beast::string_view, boost::beast::error_code&)> chunk_callback_;
};

std::string get(const std::string& target, const std::string& extra = "");
std::string post(const std::string& target, const std::string& body);

template <typename Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// An HttpServer on `socket_path_` with routes for every suite (/v1/hello, /v1/echo, /v1/runs..., /v1/later,
// /v1/hold, ...); a test may add its own before start().
class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void start(http::ServerOptions options = {});
  void TearDown() override;
  // One request on a new connection, and its reply (an empty Reply, and a failure, if none came).
  Reply request(const std::string& bytes);

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

}  // namespace capsule::http::test

// Test support for the upstream adapter tests: LoopbackServer, a tiny HTTP/1.1 server on 127.0.0.1 that answers
// one request per connection (Connection: close) from a handler and records every request, and error_of().
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "proxy/error.h"

namespace capsule::proxy::testing {

// The ProxyError a call throws; when it throws nothing, the test fails and the error has code "none".
template <class Call>
ProxyError error_of(Call call) {
  try {
    call();
  } catch (const ProxyError& e) {
    return e;
  }
  ADD_FAILURE() << "no ProxyError thrown";
  return ProxyError("none", "", "", "no error thrown");
}

struct TestRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names lower-cased

  std::string header(const std::string& lower_name) const {
    auto found = headers.find(lower_name);
    return found == headers.end() ? std::string() : found->second;
  }
};

struct TestResponse {
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

class LoopbackServer {
 public:
  using Handler = std::function<TestResponse(const TestRequest&)>;

  explicit LoopbackServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      throw std::runtime_error("loopback server: cannot listen on 127.0.0.1");
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~LoopbackServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    ::close(listen_fd_);
  }

  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  std::vector<TestRequest> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  void serve() {
    for (;;) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      answer(fd);
      ::close(fd);
    }
  }

  void answer(int fd) {
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n <= 0) return;
      head.append(buffer, static_cast<std::size_t>(n));
    }
    TestRequest request;
    std::size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    const std::size_t space1 = request_line.find(' ');
    const std::size_t space2 = request_line.find(' ', space1 + 1);
    request.method = request_line.substr(0, space1);
    request.target = request_line.substr(space1 + 1, space2 - space1 - 1);
    for (std::size_t start = line_end + 2; (line_end = head.find("\r\n", start)) != start; start = line_end + 2) {
      const std::string line = head.substr(start, line_end - start);
      const std::size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const std::size_t value = colon == std::string::npos ? line.size() : line.find_first_not_of(' ', colon + 1);
      request.headers[name] = value == std::string::npos ? std::string() : line.substr(value);
    }
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(request);
    }

    const TestResponse response = handler_(request);
    std::string out = "HTTP/1.1 " + std::to_string(response.status) + " Test\r\n";
    for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
    out += "Content-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n\r\n";
    if (request.method != "HEAD") out += response.body;
    for (std::size_t sent = 0; sent < out.size();) {
      const ssize_t n = ::write(fd, out.data() + sent, out.size() - sent);
      if (n <= 0) return;
      sent += static_cast<std::size_t>(n);
    }
  }

  Handler handler_;
  int listen_fd_ = -1;
  unsigned short port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<TestRequest> requests_;
};

}  // namespace capsule::proxy::testing

// ScriptedServer: a one-connection HTTP server on a Unix socket for client tests (tests/http, tests/client): it
// reads a request's head, then a test's script reads what else it wants and writes exactly the bytes it gives.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

namespace capsule::testing {

// HttpClient against a scripted server: one connection, the request's head is read, then `script` runs (it may
// read the body) and writes.
class ScriptedServer {
 public:
  using Script = std::function<void(int fd, const std::string& request)>;
  explicit ScriptedServer(Script script) {
    dir_ = std::filesystem::temp_directory_path() / ("capsule-scripted-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "s.sock").string();
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path_.c_str());
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    thread_ = std::thread([this, script] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n <= 0) break;
        request.append(buffer, static_cast<std::size_t>(n));
      }
      request_ = request;
      script(fd, request);
      ::close(fd);
    });
  }
  ~ScriptedServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
    std::filesystem::remove_all(dir_);
  }
  const std::string& path() const { return path_; }
  std::string request() const { return request_; }
  static void send(int fd, const std::string& data) {
    EXPECT_EQ(::send(fd, data.data(), data.size(), MSG_NOSIGNAL), ssize_t(data.size()));
  }
  static std::string chunk(const std::string& data) {
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    return size + data + "\r\n";
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string path_;
  int listen_fd_ = -1;
  std::string request_;
  std::thread thread_;
};

// Reads from `fd` onto `request` until `done(request)` or the peer closes.
inline void read_until(int fd, std::string& request, const std::function<bool(const std::string&)>& done) {
  char buffer[4096];
  while (!done(request)) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) return;
    request.append(buffer, static_cast<std::size_t>(n));
  }
}

// Reads the rest of a request whose head is in `request`: its Content-Length bytes, or chunks up to the last.
inline void read_body(int fd, std::string& request) {
  const std::size_t head_end = request.find("\r\n\r\n") + 4;
  const std::size_t length_at = request.find("Content-Length: ");
  if (length_at != std::string::npos && length_at < head_end) {
    const std::size_t length = std::stoull(request.substr(length_at + 16));
    read_until(fd, request, [&](const std::string& r) { return r.size() >= head_end + length; });
  } else if (request.find("Transfer-Encoding: chunked") < head_end) {
    read_until(fd, request, [](const std::string& r) { return r.ends_with("\r\n0\r\n\r\n"); });
  }
}

}  // namespace capsule::testing

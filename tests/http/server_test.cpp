// HttpServer's sockets and shutdown: the Unix socket's mode and group, stale versus live socket files, loopback
// TCP, and stop() letting a response in flight finish.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <stdexcept>
#include <string>

#include "tests/http/http_test_support.h"

namespace capsule::http::test {
namespace {

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

}  // namespace
}  // namespace capsule::http::test

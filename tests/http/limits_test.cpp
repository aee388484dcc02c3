// The listener's connection limits: many concurrent clients, 503 beyond max_connections (read by a late writer),
// idle connections (kept alive, or that sent nothing yet) evicted oldest first, and the per-uid cap.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "tests/http/http_test_support.h"

namespace capsule::http::test {
namespace {

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

TEST_F(HttpServerTest, ConnectionsThatSentNothingAreIdleAndTheOldestMakesRoom) {
  http::ServerOptions options;
  options.max_connections = 2;
  start(options);
  RawClient oldest(socket_path_);
  ASSERT_TRUE(eventually([&] { return server_->active_connections() == 1; }));
  RawClient newer(socket_path_);
  ASSERT_TRUE(eventually([&] { return server_->active_connections() == 2; }));
  EXPECT_EQ(request(get("/v1/hello")).status, 200u) << "two connections that sent nothing held the server";
  EXPECT_TRUE(oldest.wait_closed()) << "the oldest idle connection made room";
  newer.send(get("/v1/hello"));
  const auto reply = newer.read();
  ASSERT_TRUE(reply) << "the newer one was closed instead";
  EXPECT_EQ(reply->status, 200u);
}

TEST_F(HttpServerTest, ARefusedClientReadsItsAnswerEvenWhenItWritesLate) {
  http::ServerOptions options;
  options.max_connections = 1;
  start(options);
  RawClient busy(socket_path_);
  busy.send("GET /v1/hello HTTP/1.1\r\n");
  ASSERT_TRUE(eventually([&] { return server_->active_connections() == 1; }));
  RawClient refused(socket_path_);
  ASSERT_TRUE(eventually([&] { return server_->active_connections() == 2; }));  // answered, not yet closed
  std::this_thread::sleep_for(50ms);  // the refusal is written before the request: it must not be cut off
  EXPECT_TRUE(refused.send(get("/v1/hello")));
  const auto reply = refused.read();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 503u);
  EXPECT_EQ(reply->error_code(), "too_many_connections");
  EXPECT_TRUE(refused.wait_closed());
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

}  // namespace
}  // namespace capsule::http::test

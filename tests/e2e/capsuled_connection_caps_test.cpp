// The connection caps against hostile local users: connections that send nothing cannot fill the API's table
// (others' /v1/health still answers) nor a stack's published port (its owner is still served), and idle relayed
// connections are closed after the configured idle timeout.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>

#include "base/unique_fd.h"
#include "tests/support/auth_users.h"
#include "tests/support/capsuled_fixture.h"

namespace capsule::testing {
namespace {

const std::string kOwnerPython = "/usr/bin/python3";
constexpr int kOwnerWebPort = 18080;
constexpr std::size_t kRelayCap = 64;  // PortRelay::kMaxConnections

// Where held connections go: the daemon's Unix socket, or a TCP port on the host's loopback.
struct Endpoint {
  std::string unix_path;
  std::uint16_t tcp_port = 0;
};

int connect_endpoint(const Endpoint& endpoint) {
  if (!endpoint.unix_path.empty()) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    endpoint.unix_path.copy(address.sun_path, sizeof address.sun_path - 1);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(endpoint.tcp_port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// `count` connections to `endpoint` opened and held by a child process running as `user`, each sent `bytes`
// (nothing: idle from the start). The child reads whatever comes and counts the connections the other side
// closed; it closes them all and exits when this object goes.
class HeldConnections {
 public:
  HeldConnections(const TestUser& user, const Endpoint& endpoint, std::size_t count, const std::string& bytes = "") {
    int report[2], control[2];
    if (pipe2(report, O_CLOEXEC) != 0 || pipe2(control, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    std::vector<pollfd> polled(count + 1);  // allocated before fork: the child only makes system calls
    child_ = fork();
    if (child_ < 0) throw std::runtime_error("fork failed");
    if (child_ == 0) {
      ::close(report[0]);
      ::close(control[1]);
      hold(user, endpoint, bytes, polled, control[0], report[1]);
    }
    ::close(report[1]);
    ::close(control[0]);
    report_ = report[0];
    control_ = control[1];
    opened_ = read_number();
  }
  ~HeldConnections() {
    ::close(control_);  // EOF: the child closes everything and exits
    ::close(report_);
    int status = 0;
    while (waitpid(child_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  HeldConnections(const HeldConnections&) = delete;
  HeldConnections& operator=(const HeldConnections&) = delete;

  std::size_t opened() const { return opened_; }
  // How many of them the daemon has closed so far.
  std::size_t closed_by_peer() {
    const char ask = '?';
    if (::write(control_, &ask, 1) != 1) return 0;
    return read_number();
  }

 private:
  [[noreturn]] static void hold(const TestUser& user, const Endpoint& endpoint, const std::string& bytes,
                                std::vector<pollfd>& polled, int control, int report) {
    auto say = [report](std::size_t number) {
      char text[32];
      const int length = std::snprintf(text, sizeof text, "%zu\n", number);
      if (::write(report, text, static_cast<std::size_t>(length)) != length) _exit(1);
    };
    // Nothing else of the test process stays open here (the control pipes of other holders above all: each
    // holder must see its own pipe's EOF).
    const auto [low, high] = std::minmax(control, report);
    close_range(3, static_cast<unsigned>(low) - 1, 0);
    close_range(static_cast<unsigned>(low) + 1, static_cast<unsigned>(high) - 1, 0);
    close_range(static_cast<unsigned>(high) + 1, ~0u, 0);
    if (setgroups(user.groups.size(), user.groups.data()) != 0 || setgid(user.gid) != 0 || setuid(user.uid) != 0) {
      say(0);
      _exit(1);
    }
    polled[0] = {control, POLLIN, 0};
    std::size_t opened = 0;
    for (std::size_t i = 1; i < polled.size(); ++i) {
      const int fd = connect_endpoint(endpoint);
      if (fd < 0) break;
      if (!bytes.empty() && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) break;
      polled[i] = {fd, POLLIN, 0};
      ++opened;
    }
    say(opened);
    polled.resize(opened + 1);
    std::size_t closed = 0;
    for (;;) {
      if (::poll(polled.data(), polled.size(), -1) < 0 && errno != EINTR) _exit(1);
      for (std::size_t i = 1; i < polled.size(); ++i) {
        if (polled[i].fd < 0 || polled[i].revents == 0) continue;
        char buffer[4096];
        const ssize_t got = ::recv(polled[i].fd, buffer, sizeof buffer, 0);
        if (got > 0 || (got < 0 && errno == EINTR)) continue;
        ::close(polled[i].fd);
        polled[i].fd = -1;
        ++closed;
      }
      if (polled[0].revents != 0) {
        char ask = 0;
        if (::read(control, &ask, 1) != 1) _exit(0);  // this object went: every fd closes with the process
        say(closed);
      }
    }
  }

  std::size_t read_number() {
    std::string text;
    char c = 0;
    while (::read(report_, &c, 1) == 1 && c != '\n') text += c;
    return text.empty() ? 0 : std::stoul(text);
  }

  pid_t child_ = -1;
  int report_ = -1;
  int control_ = -1;
  std::size_t opened_ = 0;
};

// GET / through a published port on the host's loopback: the body, or what went wrong (waiting at most
// `timeout_s` for the answer: a connection stuck in the relay's backlog is never served).
std::string fetch(std::uint16_t port, int timeout_s) {
  base::UniqueFd sock(connect_endpoint({"", port}));
  if (!sock) return "connect failed";
  timeval timeout{timeout_s, 0};
  ::setsockopt(sock.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const std::string request = "GET / HTTP/1.0\r\n\r\n";
  if (::send(sock.get(), request.data(), request.size(), MSG_NOSIGNAL) < 0) return "send failed";
  std::string answer;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = ::recv(sock.get(), buffer, sizeof buffer, 0)) > 0) answer.append(buffer, static_cast<std::size_t>(got));
  if (got < 0) return std::string("no answer: ") + std::strerror(errno);
  const std::size_t body = answer.find("\r\n\r\n");
  return body == std::string::npos ? "no answer: " + answer : answer.substr(body + 4);
}

// Test users in the socket's group (the daemon is started on it), removed at the end.
class CapsuledConnectionCaps : public Capsuled {
 protected:
  void SetUp() override {
    Capsuled::SetUp();
    group_ = account_name("capsule-cc");
    create_group(group_);
  }
  void TearDown() override {
    Capsuled::TearDown();
    for (const TestUser& user : users_) remove_user(user.name);
    remove_group(group_);
  }
  const TestUser& add_user(const std::string& base) {
    users_.push_back(create_user(account_name(base), group_, {}));
    return users_.back();
  }
  // A local user outside the socket group: it cannot call capsuled at all, only reach loopback ports.
  const TestUser& add_outsider(const std::string& base) {
    users_.push_back(create_user(account_name(base), "nogroup", {}));
    EXPECT_EQ(call_as(users_.back(), socket_, "GET", "/v1/health").connect_errno, EACCES);
    return users_.back();
  }
  // capsuled with the test group as its socket group and `config` merged into its config file.
  void start_with(json config = json::object()) {
    config["socket_group"] = group_;
    const fs::path file = dir_ / "capsuled.json";
    write_file(file, config.dump());
    start({"--config", file.string()});
  }
  // A stack (root's) whose web service publishes kOwnerWebPort and answers GET / with "owner", one thread per
  // connection, so held connections occupy the relay, not the service. Its host port.
  std::uint16_t published_stack() {
    json web = {{"image", "host"},
                {"command", {kOwnerPython, "-c",
                             "import http.server\n"
                             "class H(http.server.BaseHTTPRequestHandler):\n"
                             "    def do_GET(self):\n"
                             "        self.send_response(200); self.end_headers(); self.wfile.write(b'owner')\n"
                             "http.server.ThreadingHTTPServer(('0.0.0.0', " + std::to_string(kOwnerWebPort) +
                                 "), H).serve_forever()\n"}},
                {"ready", {{"http", {{"port", kOwnerWebPort}, {"path", "/"}}}, {"deadline", "30s"}}},
                {"publish", {kOwnerWebPort}}};
    const HttpResponse response = call("POST", "/v1/stacks?wait=true", {{"services", {{"web", web}}}});
    EXPECT_EQ(response.status, 201) << response.body;
    const json stack = body_json(response);
    EXPECT_EQ(stack["state"], "up") << stack.dump(1);
    stack_ = stack.value("id", "");
    const std::string host = stack.value(json::json_pointer("/services/web/published/0/host"), std::string(":0"));
    return static_cast<std::uint16_t>(std::stoi(host.substr(host.rfind(':') + 1)));
  }
  void remove_stack() {
    EXPECT_EQ(call("DELETE", "/v1/stacks/" + stack_).status, 200);
  }
  void expect_health_as(const TestUser& user) {
    const UserCall health = call_as(user, socket_, "GET", "/v1/health");
    EXPECT_EQ(health.status, 200) << user.name << ": " << health.body << health.failure;
  }

  std::string group_;
  std::deque<TestUser> users_;  // add_user's references stay valid
  std::string stack_;
};

// Finding 10a: one user's 2000 connections that send nothing, and four users' 64 each (the whole table), leave
// /v1/health answering root, another user and the flooding user itself: a connection waiting for its first byte
// is idle, and the oldest idle one makes room. Busy ones (a partial header) still meet the per-uid cap.
TEST_F(CapsuledConnectionCaps, ConnectionsThatSendNothingCannotMakeHealthFail) {
  start_with();
  const TestUser& flooder = add_user("capsule-cc-f");
  const TestUser& bystander = add_user("capsule-cc-b");
  {
    HeldConnections flood(flooder, {socket_}, 2000);
    ASSERT_EQ(flood.opened(), 2000u);
    EXPECT_EQ(call("GET", "/v1/health").status, 200);
    expect_health_as(bystander);
    expect_health_as(flooder);  // its own oldest idle connection gives way
  }
  {
    std::vector<std::unique_ptr<HeldConnections>> held;
    for (int i = 0; i < 4; ++i) {
      held.push_back(std::make_unique<HeldConnections>(add_user("capsule-cc-" + std::to_string(i)), Endpoint{socket_}, 64));
      ASSERT_EQ(held.back()->opened(), 64u);
    }
    EXPECT_EQ(call("GET", "/v1/health").status, 200);
    expect_health_as(bystander);
  }
  {
    HeldConnections slow(flooder, {socket_}, 64, "GET /v1/health HTTP/1.1\r\n");
    ASSERT_EQ(slow.opened(), 64u);
    EXPECT_EQ(call("GET", "/v1/health").status, 200);
    // A held connection whose bytes the daemon has not read yet still counts as idle and may give way to a new
    // one (each such call takes one of them); once it has read them all, the uid is at its cap of busy ones.
    UserCall over;
    EXPECT_TRUE(eventually([&] {
      over = call_as(flooder, socket_, "GET", "/v1/health");
      return over.status == 503;
    }, 10s)) << over.status << " " << over.body << over.failure;
    expect_error_body(over.body, "too_many_connections", "uid " + std::to_string(flooder.uid));
    EXPECT_EQ(call("GET", "/v1/health").status, 200);
    expect_health_as(bystander);
  }
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
}

// Finding 6: a local user's 64 connections to a stack's published port that send nothing fill the relay; the
// owner's connection is still served (the oldest idle pair is closed to make room), and the daemon answers.
TEST_F(CapsuledConnectionCaps, IdleConnectionsCannotHoldAPublishedPort) {
  start_with();
  const TestUser& squatter = add_outsider("capsule-cc-s");
  const std::uint16_t port = published_stack();
  ASSERT_EQ(fetch(port, 10), "owner");
  {
    HeldConnections squat(squatter, {"", port}, kRelayCap);
    ASSERT_EQ(squat.opened(), kRelayCap);
    EXPECT_EQ(fetch(port, 10), "owner") << "the relay's cap turned reachability into a lockout";
    EXPECT_TRUE(eventually([&] { return squat.closed_by_peer() >= 1; }, 10s)) << "no idle pair made room";
  }
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
  remove_stack();
}

// Finding 6, the timeout: with published_port_idle_timeout_s 1, relayed connections that move no bytes are
// closed by the relay, every one of them, while a served connection works as before.
TEST_F(CapsuledConnectionCaps, IdleRelayedConnectionsAreClosedAfterTheIdleTimeout) {
  start_with({{"published_port_idle_timeout_s", 1}});
  const TestUser& squatter = add_outsider("capsule-cc-s");
  const std::uint16_t port = published_stack();
  HeldConnections squat(squatter, {"", port}, 8);
  ASSERT_EQ(squat.opened(), 8u);
  EXPECT_TRUE(eventually([&] { return squat.closed_by_peer() == 8; }, 20s)) << squat.closed_by_peer() << " of 8 closed";
  EXPECT_EQ(fetch(port, 10), "owner");
  EXPECT_EQ(call("GET", "/v1/health").status, 200);
  remove_stack();
}

}  // namespace
}  // namespace capsule::testing

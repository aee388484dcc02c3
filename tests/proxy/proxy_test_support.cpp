// Test support for the proxy service tests: fixture child process lifecycle and the in-process served proxy.
#include "tests/proxy/proxy_test_support.h"
#include "tests/support/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace capsule::proxy::testing {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "capsule-proxy-test-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
  std::filesystem::permissions(path_, std::filesystem::perms(0711));
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {

HttpClientOptions plain_client_options() {
  HttpClientOptions options;
  options.max_attempts = 1;
  options.max_redirects = 0;
  options.request_timeout = std::chrono::milliseconds(30000);
  return options;
}

}  // namespace

Spawned spawn_reading_first_line(std::vector<std::string> args) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls from here: the test may have threads
    dup2(out[1], STDOUT_FILENO);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  Spawned spawned{pid, {}};
  char c = 0;
  while (read(out[0], &c, 1) == 1 && c != '\n') spawned.first_line += c;
  close(out[0]);
  return spawned;
}

FixtureUpstream::FixtureUpstream(const std::filesystem::path& dir, bool serve) {
  std::vector<std::string> args{"python3", std::string(CAPSULE_SOURCE_DIR) + "/tests/proxy/fixtures/package_upstream.py",
                                dir.string()};
  if (serve) args.push_back("--serve");
  auto [pid, line] = spawn_reading_first_line(std::move(args));
  pid_ = pid;
  if (line.empty()) throw std::runtime_error("the fixture upstream did not start");
  info_ = nlohmann::json::parse(line);
  if (!serve) {
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  client_ = std::make_unique<HttpClient>(plain_client_options());
}

FixtureUpstream::~FixtureUpstream() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string FixtureUpstream::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(info_.at("port").get<int>()) + path;
}

int FixtureUpstream::count(const std::string& method_and_path) const {
  const auto stats = nlohmann::json::parse(client_->get(url("/_stats")).body);
  return stats.value(method_and_path, 0);
}

void FixtureUpstream::control(const nlohmann::json& settings) const {
  // HttpClient has no POST; the fixture reads its control settings from a plain socket request instead.
  const std::string body = settings.dump();
  const std::string request = "POST /_control HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(info_.at("port").get<int>()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    throw std::runtime_error("cannot reach the fixture's /_control");
  }
  char buffer[512];
  while (read(fd, buffer, sizeof buffer) > 0) {
  }
  close(fd);
}

ServedProxy::ServedProxy(ProxyOptions options, PackageProxy::Listener listener)
    : proxy_(std::make_unique<PackageProxy>(std::move(options))), router_(std::make_shared<http::Router>()) {
  proxy_->add_routes(*router_, std::move(listener));
  server_ = std::make_unique<http::HttpServer>(io_, std::shared_ptr<const http::Router>(router_));
  port_ = server_->listen_tcp("127.0.0.1", 0);
  for (int i = 0; i < 2; ++i) {
    threads_.emplace_back([this] {
      auto guard = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }
  client_ = std::make_unique<HttpClient>(plain_client_options());
}

std::string ServedProxy::add_listener(PackageProxy::Listener listener) {
  auto router = std::make_shared<http::Router>();
  proxy_->add_routes(*router, std::move(listener));
  more_servers_.push_back(std::make_unique<http::HttpServer>(io_, std::shared_ptr<const http::Router>(router)));
  return "http://127.0.0.1:" + std::to_string(more_servers_.back()->listen_tcp("127.0.0.1", 0));
}

ServedProxy::~ServedProxy() {
  for (auto& server : more_servers_) server->stop();
  server_->stop();
  proxy_.reset();  // lets requests in flight answer while the io threads still run
  io_.stop();
  for (auto& thread : threads_) thread.join();
  more_servers_.clear();
  server_.reset();
}

std::string ServedProxy::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

HttpResponse ServedProxy::get(const std::string& path, const std::vector<std::pair<std::string, std::string>>& headers) {
  return client_->get(url(path), headers);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace capsule::proxy::testing

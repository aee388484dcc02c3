// Tests of the capsule CLI's transport and binaries: the HTTP client against a scripted socket server, and the
// real `capsule` (against a real capsuled) and `capsule-launch` binaries (skipped when they are not built).
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "base/base64.h"
#include "client/cli_daemon.h"
#include "http/unix_client.h"

#ifndef CAPSULE_BIN_DIR
#define CAPSULE_BIN_DIR ""
#endif

extern char** environ;

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TEST(UrlEncode, KeepsLabelFiltersReadable) {
  EXPECT_EQ(http::url_encode("suite=unit"), "suite=unit");
  EXPECT_EQ(http::url_encode("a b&c/d+e"), "a%20b%26c%2Fd%2Be");
}

// ---------------------------------------------------------------------------------------------------------
// HttpClient against a scripted server: one connection, the request is read, then `script` writes.

class ScriptedServer {
 public:
  using Script = std::function<void(int fd, const std::string& request)>;
  explicit ScriptedServer(Script script) {
    dir_ = fs::temp_directory_path() / ("capsule-http-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_);
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
    fs::remove_all(dir_);
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
  fs::path dir_;
  std::string path_;
  int listen_fd_ = -1;
  std::string request_;
  std::thread thread_;
};

TEST(HttpClient, RequestSendsJsonAndReadsTheWholeResponse) {
  ScriptedServer server([](int fd, const std::string&) {
    ScriptedServer::send(fd, "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nX-Run: 7\r\n"
                             "Content-Length: 28\r\n\r\n{\"id\":\"7\",\"state\":\"queued\"}\n");
  });
  const http::HttpResponse response = http::HttpClient(server.path()).request("POST", "/v1/runs", json{{"argv", {"true"}}});
  EXPECT_EQ(response.status, 202);
  EXPECT_EQ(response.headers.at("x-run"), "7");
  EXPECT_EQ(json::parse(response.body)["id"], "7");
  EXPECT_NE(server.request().find("POST /v1/runs HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(server.request().find("Content-Type: application/json"), std::string::npos);
}

TEST(HttpClient, StreamDeliversChunkedLinesAsTheyArrive) {
  std::atomic<bool> first_line_seen{false};
  bool seen_before_the_rest = false;
  ScriptedServer server([&](int fd, const std::string&) {
    ScriptedServer::send(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n");
    ScriptedServer::send(fd, ScriptedServer::chunk(R"({"event":"queue)"));
    ScriptedServer::send(fd, ScriptedServer::chunk("d\"}"));
    ScriptedServer::send(fd, ScriptedServer::chunk("\n"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!first_line_seen && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    seen_before_the_rest = first_line_seen;
    ScriptedServer::send(fd, ScriptedServer::chunk(R"({"event":"end")") + ScriptedServer::chunk("}") + "0\r\n\r\n");
  });
  std::vector<std::string> lines;
  const http::HttpResponse response = http::HttpClient(server.path()).stream_lines(
      "POST", "/v1/runs", json::object(), {{"Accept", "application/x-ndjson"}}, [&](std::string_view line) {
        lines.emplace_back(line);
        first_line_seen = true;
      });
  EXPECT_EQ(response.status, 200);
  EXPECT_TRUE(seen_before_the_rest) << "the first line was not delivered before the stream ended";
  EXPECT_EQ(lines, (std::vector<std::string>{R"({"event":"queued"})", R"({"event":"end"})"}));
  EXPECT_NE(server.request().find("Accept: application/x-ndjson"), std::string::npos);
}

TEST(Base64, RoundTripsEveryByteValueAndEveryPadding) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n <= all.size(); ++n) {
    const std::string bytes = all.substr(all.size() - n);
    const std::string text = base::base64_encode(bytes);
    EXPECT_EQ(text.size(), (n + 2) / 3 * 4);
    EXPECT_EQ(base::base64_decode(text), bytes) << n;
  }
  EXPECT_EQ(base::base64_encode("\xF0\x9F\x98\x80"), "8J+YgA==");
  EXPECT_EQ(base::base64_decode("8J+YgA=="), "\xF0\x9F\x98\x80");
}

TEST(Base64, RejectsWhatIsNotBase64) {
  EXPECT_FALSE(base::base64_decode("abc"));
  EXPECT_FALSE(base::base64_decode("ab!d"));
  EXPECT_FALSE(base::base64_decode("a=bc"));
  EXPECT_FALSE(base::base64_decode("\"QQ==\""));
}

// Sends `size` bytes of 'x' (then "\n" when `newline`) as chunks of 1 MiB, ignoring a client that left.
void send_long_line(int fd, std::size_t size, bool newline) {
  ScriptedServer::send(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string piece = ScriptedServer::chunk(std::string(1 << 20, 'x'));
  for (std::size_t sent = 0; sent < size; sent += 1 << 20) {
    const std::string& data = size - sent >= (1u << 20) ? piece : ScriptedServer::chunk(std::string(size - sent, 'x'));
    if (::send(fd, data.data(), data.size(), MSG_NOSIGNAL) != ssize_t(data.size())) return;
  }
  const std::string end = (newline ? ScriptedServer::chunk("\n") : "") + "0\r\n\r\n";
  (void)!::send(fd, end.data(), end.size(), MSG_NOSIGNAL);
}

TEST(HttpClient, StreamLinesDeliversLongLinesWholeAndRefusesOnesPastTheLimit) {
  {
    ScriptedServer server([](int fd, const std::string&) { send_long_line(fd, 20u << 20, true); });
    std::vector<std::size_t> sizes;
    http::HttpClient(server.path()).stream_lines("POST", "/v1/runs", json::object(), {}, [&](std::string_view line) {
      sizes.push_back(line.find_first_not_of('x') == std::string_view::npos ? line.size() : 0);
    });
    EXPECT_EQ(sizes, std::vector<std::size_t>{20u << 20});
  }
  ScriptedServer server([](int fd, const std::string&) { send_long_line(fd, http::HttpClient::kMaxLineBytes + 1, false); });
  try {
    http::HttpClient(server.path()).stream_lines("POST", "/v1/runs", json::object(), {}, [](std::string_view) {});
    ADD_FAILURE() << "a line past the limit was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 64 MiB"), std::string::npos) << e.what();
  }
}

TEST(HttpClient, ErrorBodiesBecomeApiErrors) {
  ScriptedServer server([](int fd, const std::string&) {
    const std::string body = R"({"error":{"code":"invalid_spec","message":"limits.memory: bad"}})";
    ScriptedServer::send(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  bool called = false;
  const http::HttpResponse response = http::HttpClient(server.path()).stream("POST", "/v1/runs", json::object(), {},
                                                                 [&](std::string_view) { called = true; });
  EXPECT_FALSE(called);
  try {
    http::throw_if_error(response);
    FAIL() << "no http::ResponseError";
  } catch (const http::ResponseError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_spec");
    EXPECT_STREQ(e.what(), "limits.memory: bad (invalid_spec)");
  }
}

TEST(HttpClient, ConnectErrorsNameTheSocketAndErrno) {
  const std::string missing = "/nonexistent-capsule-dir/capsule.sock";
  try {
    http::HttpClient(missing).request("GET", "/v1/health");
    FAIL() << "connected to nothing";
  } catch (const http::ConnectError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot connect to capsuled at " + missing + ": No such file or directory");
    EXPECT_TRUE(e.nobody_listening());
  }
  // A bound socket nobody listens on: ECONNREFUSED.
  const std::string path = (fs::temp_directory_path() / ("capsule-refuse-" + std::to_string(::getpid()))).string();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  try {
    http::HttpClient(path).request("GET", "/v1/health");
    FAIL() << "connected to a socket that does not listen";
  } catch (const http::ConnectError& e) {
    EXPECT_EQ(e.error(), ECONNREFUSED);
    EXPECT_TRUE(e.nobody_listening());
  }
  ::close(fd);
  ::unlink(path.c_str());
}

// ---------------------------------------------------------------------------------------------------------
// The real binaries: capsuled on a temp socket, `capsule` run as a child process.

struct Outcome {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

pid_t spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err,
            const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env_strings = extra_env;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  std::vector<char*> env, argv;
  for (auto& item : env_strings) env.push_back(item.data());
  env.push_back(nullptr);
  std::vector<std::string> copy = args;
  for (auto& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(error, 0) << args[0];
  return pid;
}

int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "pid " << pid << " did not exit within " << limit.count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Running and not a zombie (an auto-started daemon is reparented; its new parent reaps it).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

class CliWithDaemon : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path capsuled = fs::path(CAPSULE_BIN_DIR) / "capsuled";
    if (std::string(CAPSULE_BIN_DIR).empty() || !fs::exists(capsuled)) return;
    char pattern[] = "/tmp/capsule-cli-XXXXXX";
    dir_ = ::mkdtemp(pattern);
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    socket_ = dir_ / "s.sock";
    daemon_ = spawn({capsuled.string(), "--socket", socket_.string(), "--state-dir", (dir_ / "state").string(),
                     "--foreground"},
                    dir_ / "capsuled.out", dir_ / "capsuled.log");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        if (http::HttpClient(socket_.string()).request("GET", "/v1/health").status == 200) return;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "capsuled did not answer on " << socket_ << "; log:\n" << slurp(dir_ / "capsuled.log");
  }
  static void TearDownTestSuite() {
    if (daemon_ > 0) {
      ::kill(daemon_, SIGTERM);
      wait_exit(daemon_, std::chrono::seconds(60));
      daemon_ = -1;
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (daemon_ <= 0) GTEST_SKIP() << "capsuled is not built at " << CAPSULE_BIN_DIR;
  }

  static Outcome capsule(std::vector<std::string> args, std::chrono::seconds limit = std::chrono::seconds(60)) {
    args.insert(args.begin(), {(fs::path(CAPSULE_BIN_DIR) / "capsule").string(), "--socket", socket_.string()});
    const pid_t pid = spawn(args, dir_ / "out", dir_ / "err");
    Outcome outcome;
    outcome.code = wait_exit(pid, limit);
    outcome.out = slurp(dir_ / "out");
    outcome.err = slurp(dir_ / "err");
    return outcome;
  }
  static json api(const std::string& method, const std::string& target) {
    return http::request_json(http::HttpClient(socket_.string()), method, target);
  }
  static std::string unique_label() {
    static int n = 0;
    return "cli-test=" + std::to_string(::getpid()) + "-" + std::to_string(++n);
  }

  static inline fs::path dir_;
  static inline fs::path socket_;
  static inline pid_t daemon_ = -1;
};

TEST_F(CliWithDaemon, RunStreamsOutputAndExitsWithTheCommandsCode) {
  const Outcome o = capsule({"run", "--", "sh", "-c", "echo hi; echo oops >&2; exit 3"});
  EXPECT_EQ(o.code, 3) << o.err;
  EXPECT_EQ(o.out, "hi\n");
  EXPECT_NE(o.err.find("oops\n"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(" failed in "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("(exit 3)"), std::string::npos) << o.err;
}

// Every byte value, then a 4-byte UTF-8 character split across two writes: the CLI's stdout is exactly that.
TEST_F(CliWithDaemon, RunRelaysOutputBytesExactly) {
  const std::string script =
      "i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; i=$((i+1)); done; "
      "printf '\\360\\237'; sleep 0.2; printf '\\230\\200'; printf '\\377' >&2";
  const Outcome o = capsule({"run", "--", "sh", "-c", script});
  ASSERT_EQ(o.code, 0) << o.err;
  std::string expected;
  for (int i = 0; i < 256; ++i) expected += static_cast<char>(i);
  expected += "\xF0\x9F\x98\x80";
  EXPECT_EQ(o.out, expected);
  EXPECT_EQ(o.err.substr(0, 1), "\xFF");
}

// 1 MiB of control bytes read by a slow consumer: the events and the finished run object stay small enough
// that the daemon keeps the stream (it used to fall 8 MiB behind and drop it: exit 125).
TEST_F(CliWithDaemon, MebibyteOfControlBytesToASlowReaderExitsZero) {
  const std::string capsule_bin = (fs::path(CAPSULE_BIN_DIR) / "capsule").string();
  const std::string pipeline = capsule_bin + " --socket " + socket_.string() +
                               " run -- sh -c 'head -c 1048576 /dev/zero | tr \"\\0\" \"\\1\"'"
                               " 2>" + (dir_ / "slow.err").string() + "; echo $? >" + (dir_ / "slow.code").string();
  const pid_t pid = spawn({"/bin/sh", "-c", "(" + pipeline + ") | (sleep 3; cat > " + (dir_ / "slow.out").string() + ")"},
                          dir_ / "out", dir_ / "err");
  ASSERT_EQ(wait_exit(pid, std::chrono::seconds(120)), 0);
  EXPECT_EQ(slurp(dir_ / "slow.code"), "0\n") << slurp(dir_ / "slow.err");
  EXPECT_EQ(slurp(dir_ / "slow.out"), std::string(1 << 20, '\1'));
}

// A reader that stalls while the command floods: whatever the daemon could relay, `capsule run` never passes
// an incomplete stdout off as the command's: either every byte arrived (exit 0) or it exits 125 and says so.
TEST_F(CliWithDaemon, OutputItCouldNotRelayWholeIsNeverPassedOffAsWhole) {
  const std::string capsule_bin = (fs::path(CAPSULE_BIN_DIR) / "capsule").string();
  const std::string pipeline = capsule_bin + " --socket " + socket_.string() +
                               " run -- sh -c 'head -c 268435456 /dev/zero'"
                               " 2>" + (dir_ / "flood.err").string() + "; echo $? >" + (dir_ / "flood.code").string();
  const pid_t pid = spawn({"/bin/sh", "-c", "(" + pipeline + ") | (sleep 2; wc -c > " + (dir_ / "flood.count").string() + ")"},
                          dir_ / "out", dir_ / "err");
  ASSERT_EQ(wait_exit(pid, std::chrono::seconds(300)), 0);
  const std::string code = slurp(dir_ / "flood.code");
  const std::string err = slurp(dir_ / "flood.err");
  if (code == "0\n") {
    EXPECT_EQ(slurp(dir_ / "flood.count"), "268435456\n") << err;
  } else {
    EXPECT_EQ(code, "125\n") << err;
    EXPECT_NE(err.find("were not relayed"), std::string::npos) << err;
    EXPECT_NE(slurp(dir_ / "flood.count"), "268435456\n") << err;
  }
}

TEST_F(CliWithDaemon, TimeoutExits124) {
  const auto start = std::chrono::steady_clock::now();
  const Outcome o = capsule({"run", "--timeout", "1s", "--", "sleep", "30"});
  EXPECT_EQ(o.code, 124) << o.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(o.err.find("timed_out"), std::string::npos) << o.err;
}

TEST_F(CliWithDaemon, JsonPrintsTheRunObjectAndLsAndLogsFindIt) {
  const std::string label = unique_label();
  const Outcome o = capsule({"run", "--json", "--label", label, "--", "sh", "-c", "echo to-out; echo to-err >&2"});
  ASSERT_EQ(o.code, 0) << o.err;
  const json run = json::parse(o.out);
  EXPECT_EQ(run["state"], "succeeded");
  EXPECT_EQ(run["result"]["exit_code"], 0);
  const std::string id = run["id"];

  const Outcome ls = capsule({"runs", "ls", "--label", label});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(ls.out.rfind("ID ", 0), 0u) << ls.out;
  EXPECT_NE(ls.out.find(id), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("succeeded"), std::string::npos) << ls.out;

  const Outcome ls_json = capsule({"runs", "ls", "--json", "--label", label});
  ASSERT_EQ(ls_json.code, 0) << ls_json.err;
  const json page = json::parse(ls_json.out);
  ASSERT_EQ(page["runs"].size(), 1u);
  EXPECT_EQ(page["runs"][0]["id"], id);

  const Outcome out = capsule({"runs", "logs", id});
  EXPECT_EQ(out.code, 0) << out.err;
  EXPECT_EQ(out.out, "to-out\n");
  EXPECT_EQ(capsule({"runs", "logs", id, "--stderr"}).out, "to-err\n");

  const Outcome show = capsule({"runs", "show", id});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(json::parse(show.out)["id"], id);

  const Outcome cancel = capsule({"runs", "cancel", id});
  EXPECT_EQ(cancel.code, 1);
  EXPECT_NE(cancel.err.find("capsule: "), std::string::npos) << cancel.err;
}

TEST_F(CliWithDaemon, BadFlagValuesExitNonZeroWithAMessage) {
  const Outcome memory = capsule({"run", "--memory", "4x", "--", "true"});
  EXPECT_EQ(memory.code, 125);
  EXPECT_NE(memory.err.find("limits.memory"), std::string::npos) << memory.err;
  const Outcome cpus = capsule({"run", "--cpus", "lots", "--", "true"});
  EXPECT_EQ(cpus.code, 125);
  EXPECT_NE(cpus.err.find("--cpus"), std::string::npos) << cpus.err;
  const Outcome unknown = capsule({"runs", "show", "no-such-run"});
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("capsule: "), std::string::npos) << unknown.err;
}

TEST_F(CliWithDaemon, DetachAndCancel) {
  const Outcome submitted = capsule({"run", "-d", "--", "sleep", "30"});
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  ASSERT_FALSE(id.empty());
  const Outcome cancel = capsule({"runs", "cancel", id});
  EXPECT_EQ(cancel.code, 0) << cancel.err;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string state;
  while ((state = api("GET", "/v1/runs/" + id)["state"]) == "queued" || state == "running") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "still " << state;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(state, "cancelled");
}

TEST_F(CliWithDaemon, CtrlCCancelsTheStreamedRun) {
  const std::string label = unique_label();
  const pid_t pid = spawn({(fs::path(CAPSULE_BIN_DIR) / "capsule").string(), "--socket", socket_.string(), "run",
                           "--label", label, "--", "sleep", "30"},
                          dir_ / "int.out", dir_ / "int.err");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (api("GET", "/v1/runs?state=running&label=" + http::url_encode(label))["runs"].empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << slurp(dir_ / "int.err");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid, std::chrono::seconds(30)), 137);
  const std::string err = slurp(dir_ / "int.err");
  EXPECT_NE(err.find("cancelling run"), std::string::npos) << err;
  EXPECT_NE(err.find("cancelled"), std::string::npos) << err;
}

TEST_F(CliWithDaemon, VersionShowsBoth) {
  const Outcome o = capsule({"version"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out.rfind("capsule " + std::string(client_version()) + "\n", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("\ncapsuled "), std::string::npos) << o.out;
}

TEST_F(CliWithDaemon, RunStartsADaemonWhenNoneListens) {
  const fs::path socket = dir_ / "auto.sock";
  const Outcome o = [&] {
    const pid_t pid = spawn({(fs::path(CAPSULE_BIN_DIR) / "capsule").string(), "--socket", socket.string(), "run",
                             "--", "echo", "auto"},
                            dir_ / "auto.out", dir_ / "auto.err", {"CAPSULE_STATE_DIR=" + (dir_ / "auto-state").string()});
    return Outcome{wait_exit(pid, std::chrono::seconds(60)), slurp(dir_ / "auto.out"), slurp(dir_ / "auto.err")};
  }();
  const auto at = o.err.find("capsule: started capsuled (pid ");
  ASSERT_NE(at, std::string::npos) << o.err;
  const pid_t started = std::stoi(o.err.substr(at + std::strlen("capsule: started capsuled (pid ")));
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "auto\n");
  EXPECT_TRUE(fs::exists(dir_ / "auto-state" / "capsuled.log"));
  ASSERT_GT(started, 1);
  ::kill(started, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (alive(started) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// capsule-launch with `capsule run`'s letters (-W workspace, -w workdir, -e, -m) and its exit rule: the
// command's status, 127 for a command that is not there, 124 for a timeout, 125 for a malformed flag value.
TEST(CapsuleLaunch, SameFlagLettersAndExitRuleAsCapsuleRun) {
  const fs::path launch = fs::path(CAPSULE_BIN_DIR) / "capsule-launch";
  if (std::string(CAPSULE_BIN_DIR).empty() || !fs::exists(launch)) GTEST_SKIP() << "capsule-launch is not built";
  if (::geteuid() != 0) GTEST_SKIP() << "capsule-launch needs root";
  char pattern[] = "/tmp/capsule-launch-XXXXXX";
  const fs::path dir = ::mkdtemp(pattern);
  const std::shared_ptr<void> remove_dir(nullptr, [&](void*) { fs::remove_all(dir); });
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::create_directories(dir / "ws" / "sub");
  std::ofstream(dir / "ws" / "marker") << "marker\n";
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {launch.string(), "--state-dir", (dir / "state").string()});
    const pid_t pid = spawn(args, dir / "out", dir / "err");
    Outcome outcome;
    outcome.code = wait_exit(pid, std::chrono::seconds(120));
    outcome.out = slurp(dir / "out");
    outcome.err = slurp(dir / "err");
    return outcome;
  };

  const Outcome exited = run({"-W", (dir / "ws").string(), "-w", "/workspace/sub", "-e", "A=from-flag", "-m", "256m",
                              "--", "sh", "-c", "pwd; cat ../marker; echo $A; exit 3"});
  EXPECT_EQ(exited.code, 3) << exited.err;
  const json result = json::parse(exited.out, nullptr, false);
  EXPECT_EQ(result.value("status", ""), "failed") << exited.out;
  EXPECT_EQ(result["stdout"].value("head", ""), "/workspace/sub\nmarker\nfrom-flag\n") << exited.out;

  const Outcome missing = run({"--", "/no/such/command"});
  EXPECT_EQ(missing.code, 127) << missing.out << missing.err;
  const Outcome timed_out = run({"--timeout", "1s", "--", "sleep", "30"});
  EXPECT_EQ(timed_out.code, 124) << timed_out.out << timed_out.err;
  const Outcome bad_size = run({"-m", "4x", "--", "true"});
  EXPECT_EQ(bad_size.code, 125);
  EXPECT_NE(bad_size.err.find("capsule-launch: "), std::string::npos) << bad_size.err;
  const Outcome bad_flag = run({"--no-such-flag", "--", "true"});
  EXPECT_EQ(bad_flag.code, 125) << bad_flag.err;
}

}  // namespace
}  // namespace capsule::client

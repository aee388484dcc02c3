// Tests of http::HttpClient, the Unix-socket client of the CLI and the benchmarks, against a scripted server
// (tests/support) that writes exactly the bytes a test gives it (statuses, chunking, errors), and of url_encode.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "http/unix_client.h"
#include "tests/support/scripted_server.h"

namespace capsule::http {
namespace {

using nlohmann::json;
using testing::ScriptedServer;
namespace fs = std::filesystem;

TEST(UrlEncode, KeepsLabelFiltersReadable) {
  EXPECT_EQ(url_encode("suite=unit"), "suite=unit");
  EXPECT_EQ(url_encode("a b&c/d+e"), "a%20b%26c%2Fd%2Be");
}

TEST(HttpClient, RequestSendsJsonAndReadsTheWholeResponse) {
  ScriptedServer server([](int fd, const std::string&) {
    ScriptedServer::send(fd, "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nX-Run: 7\r\n"
                             "Content-Length: 28\r\n\r\n{\"id\":\"7\",\"state\":\"queued\"}\n");
  });
  const HttpResponse response = HttpClient(server.path()).request("POST", "/v1/runs", json{{"argv", {"true"}}});
  EXPECT_EQ(response.status, 202);
  EXPECT_EQ(response.headers.at("x-run"), "7");
  EXPECT_EQ(json::parse(response.body)["id"], "7");
  EXPECT_NE(server.request().find("POST /v1/runs HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(server.request().find("Content-Type: application/json"), std::string::npos);
}

TEST(HttpClient, RequestBytesSendsTheBodyAsItIs) {
  std::string received;
  ScriptedServer server([&](int fd, const std::string& head) {
    received = head;
    testing::read_body(fd, received);
    ScriptedServer::send(fd, "HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}");
  });
  const HttpResponse response = HttpClient(server.path()).request_bytes(
      "POST", "/v1/sessions/s/execs/e/stdin", std::string("\x03ls\0\r", 5), "application/octet-stream");
  EXPECT_EQ(response.status, 202);
  EXPECT_NE(received.find("Content-Type: application/octet-stream\r\n"), std::string::npos) << received;
  EXPECT_NE(received.find("Content-Length: 5\r\n"), std::string::npos) << received;
  EXPECT_TRUE(received.ends_with(std::string("\r\n\r\n\x03ls\0\r", 9))) << received;
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
  const HttpResponse response = HttpClient(server.path()).stream_lines(
      "POST", "/v1/runs", json::object(), {{"Accept", "application/x-ndjson"}}, [&](std::string_view line) {
        lines.emplace_back(line);
        first_line_seen = true;
      });
  EXPECT_EQ(response.status, 200);
  EXPECT_TRUE(seen_before_the_rest) << "the first line was not delivered before the stream ended";
  EXPECT_EQ(lines, (std::vector<std::string>{R"({"event":"queued"})", R"({"event":"end"})"}));
  EXPECT_NE(server.request().find("Accept: application/x-ndjson"), std::string::npos);
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
    HttpClient(server.path()).stream_lines("POST", "/v1/runs", json::object(), {}, [&](std::string_view line) {
      sizes.push_back(line.find_first_not_of('x') == std::string_view::npos ? line.size() : 0);
    });
    EXPECT_EQ(sizes, std::vector<std::size_t>{20u << 20});
  }
  ScriptedServer server([](int fd, const std::string&) { send_long_line(fd, HttpClient::kMaxLineBytes + 1, false); });
  try {
    HttpClient(server.path()).stream_lines("POST", "/v1/runs", json::object(), {}, [](std::string_view) {});
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
  const HttpResponse response = HttpClient(server.path()).stream("POST", "/v1/runs", json::object(), {},
                                                                 [&](std::string_view) { called = true; });
  EXPECT_FALSE(called);
  try {
    throw_if_error(response);
    FAIL() << "no ResponseError";
  } catch (const ResponseError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.code(), "invalid_spec");
    EXPECT_STREQ(e.what(), "limits.memory: bad (invalid_spec)");
  }
}

TEST(HttpClient, ConnectErrorsNameTheSocketAndErrno) {
  const std::string missing = "/nonexistent-capsule-dir/capsule.sock";
  try {
    HttpClient(missing).request("GET", "/v1/health");
    FAIL() << "connected to nothing";
  } catch (const ConnectError& e) {
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
    HttpClient(path).request("GET", "/v1/health");
    FAIL() << "connected to a socket that does not listen";
  } catch (const ConnectError& e) {
    EXPECT_EQ(e.error(), ECONNREFUSED);
    EXPECT_TRUE(e.nobody_listening());
  }
  ::close(fd);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace capsule::http

// TCP and HTTP probes with non-blocking sockets and one deadline each: a service that accepts and then says
// nothing, or trickles bytes, costs the probe its timeout and no more.
#include "daemon/stacks/probes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cctype>

#include "base/unique_fd.h"

namespace capsule::daemon {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// A connected socket, or none with the outcome saying why.
base::UniqueFd connect_loopback(std::uint16_t port, Clock::time_point deadline, ProbeOutcome& outcome) {
  base::UniqueFd sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock) {
    outcome.detail = std::string("socket: ") + std::strerror(errno);
    return {};
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int error = 0;
  if (connect(sock.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd wanted{sock.get(), POLLOUT, 0};
      if (poll(&wanted, 1, remaining_ms(deadline)) <= 0) {
        outcome.detail = "connect timed out";
        return {};
      }
      socklen_t length = sizeof error;
      getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    }
  }
  if (error != 0) {
    outcome.refused = error == ECONNREFUSED;
    outcome.detail = outcome.refused ? "connection refused" : std::string("connect: ") + std::strerror(error);
    return {};
  }
  return sock;
}

}  // namespace

ProbeOutcome probe_tcp(std::uint16_t port, std::chrono::milliseconds timeout) {
  ProbeOutcome outcome;
  if (connect_loopback(port, Clock::now() + timeout, outcome)) {
    outcome.ready = true;
    outcome.detail = "connected";
  }
  return outcome;
}

ProbeOutcome probe_http(std::uint16_t port, const std::string& path, int status, const std::string& host,
                        std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  ProbeOutcome outcome;
  base::UniqueFd sock = connect_loopback(port, deadline, outcome);
  if (!sock) return outcome;
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  if (send(sock.get(), request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    outcome.detail = "the request could not be sent";
    return outcome;
  }
  std::string answer;
  char buffer[1024];
  while (answer.find("\r\n") == std::string::npos && answer.size() < 4096) {
    pollfd wanted{sock.get(), POLLIN, 0};
    if (poll(&wanted, 1, remaining_ms(deadline)) <= 0) {
      outcome.detail = "no HTTP status line in time";
      return outcome;
    }
    const ssize_t got = recv(sock.get(), buffer, sizeof buffer, 0);
    if (got <= 0) break;
    answer.append(buffer, static_cast<std::size_t>(got));
  }
  // "HTTP/1.1 200 OK": the three digits after the version.
  const std::string line = answer.substr(0, answer.find("\r\n"));
  const std::size_t space = line.find(' ');
  if (!line.starts_with("HTTP/") || space == std::string::npos || line.size() < space + 4 ||
      !std::isdigit(static_cast<unsigned char>(line[space + 1])) ||
      !std::isdigit(static_cast<unsigned char>(line[space + 2])) ||
      !std::isdigit(static_cast<unsigned char>(line[space + 3]))) {
    outcome.detail = "not an HTTP answer";
    return outcome;
  }
  const int got = std::stoi(line.substr(space + 1, 3));
  outcome.ready = got == status;
  outcome.detail = "HTTP " + std::to_string(got);
  return outcome;
}

}  // namespace capsule::daemon

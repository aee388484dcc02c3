// A small synchronous HTTP/1.1 client for capsuled's Unix socket (Boost.Beast): one connection per request,
// JSON bodies, and a streaming variant for chunked ndjson events and followed logs.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"

namespace capsule::http {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // empty when a streaming call delivered it to the callback
};

// No daemon answers on the socket: what() is "cannot connect to capsuled at <path>: <errno text>"; the cause
// holds the socket path and the errno; code "connect_failed".
class ConnectError : public base::Error {
 public:
  ConnectError(const std::string& path, int error);
  int error() const { return cause().errno_value; }  // errno value (ENOENT, ECONNREFUSED, ...)
  // True when nothing listens there, so starting a daemon is the fix (ENOENT, ECONNREFUSED).
  bool nobody_listening() const;
};

// The daemon answered with 4xx/5xx: code and message (cause().detail) come from its {"error": {"code",
// "message"}} body; what() is "<message> (<code>)". Keeps the HTTP status it received.
class ResponseError : public base::Error {
 public:
  ResponseError(int status, std::string code, const std::string& message);
  int status() const { return status_; }

 private:
  int status_;
};

using Headers = std::map<std::string, std::string>;
using ChunkCallback = std::function<void(std::string_view data)>;

// A descriptor a streaming call watches beside its socket while it waits for the daemon, and what to do, on the
// calling thread, each time it is readable (e.g. a signalfd: send a cancel). No fd (-1): nothing is watched.
struct StreamWatch {
  int fd = -1;
  std::function<void()> on_readable{};
};

class HttpClient {
 public:
  explicit HttpClient(std::string socket_path) : socket_path_(std::move(socket_path)) {}
  const std::string& socket_path() const { return socket_path_; }
  // Connects and hangs up, sending nothing: whether something listens, for the price of a connect (a request
  // costs the daemon a parse, a route and an answer). Throws ConnectError when it cannot connect.
  void probe() const;

  // Sends one request (body as JSON when not null) and reads the whole response. Throws ConnectError when the
  // socket does not answer and std::runtime_error for transport failures; HTTP error statuses are returned.
  HttpResponse request(const std::string& method, const std::string& target, const nlohmann::json& body = nullptr,
                       const Headers& headers = {}) const;

  // Like request(), with `bytes` as the body under `content_type` instead of JSON.
  HttpResponse request_bytes(const std::string& method, const std::string& target, std::string bytes,
                             const std::string& content_type) const;

  // Like request(), but a 2xx body is handed to `on_data` piece by piece as it arrives (chunked or not) instead
  // of being collected. Error bodies (status >= 300) are collected into the response as usual.
  HttpResponse stream(const std::string& method, const std::string& target, const nlohmann::json& body,
                      const Headers& headers, const ChunkCallback& on_data, const StreamWatch& watch = {}) const;

  // stream(), split into lines without their '\n'; a last line without '\n' is delivered too. A line longer
  // than kMaxLineBytes throws std::runtime_error naming the limit (the daemon's events stay far below it).
  static constexpr std::size_t kMaxLineBytes = 64u << 20;
  HttpResponse stream_lines(const std::string& method, const std::string& target, const nlohmann::json& body,
                            const Headers& headers, const ChunkCallback& on_line, const StreamWatch& watch = {}) const;

 private:
  std::string socket_path_;
};

// Throws ResponseError when the response is an error (status >= 400), with the daemon's code and message when the
// body has them, otherwise the status and body text.
void throw_if_error(const HttpResponse& response);
// request() + throw_if_error() + the body parsed as JSON.
nlohmann::json request_json(const HttpClient& client, const std::string& method, const std::string& target,
                            const nlohmann::json& body = nullptr);

// Percent-encodes a path segment or query value: all but unreserved characters and "=:,@" (so a label
// filter reads label=k=v).
std::string url_encode(std::string_view text);

}  // namespace capsule::http

// Synchronous HTTP/1.1 over AF_UNIX with Boost.Beast: connect, write one request, read the response whole or
// as it arrives (buffer_body), with errors that name the socket and the errno text.
#include "http/unix_client.h"

#include <poll.h>
#include <sys/un.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#ifndef CAPSULE_VERSION
#define CAPSULE_VERSION "unknown"
#endif

namespace capsule::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Socket = asio::local::stream_protocol::socket;

std::string lower(boost::beast::string_view text) {
  std::string out(text.data(), text.size());
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

[[noreturn]] void transport_failure(const std::string& path, const std::string& step, const beast::error_code& ec) {
  throw std::runtime_error("lost connection to capsuled at " + path + " while " + step + ": " + ec.message());
}

// A request body: its Content-Type and bytes.
struct Payload {
  std::string content_type;
  std::string bytes;
};
std::optional<Payload> json_payload(const nlohmann::json& body) {
  if (body.is_null()) return std::nullopt;
  return Payload{"application/json", body.dump()};
}

// A connected socket to the daemon at `path`. Throws ConnectError.
Socket connect_to(asio::io_context& io, const std::string& path) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un{}.sun_path)) throw ConnectError(path, ENAMETOOLONG);
  Socket socket(io);
  beast::error_code ec;
  socket.connect(asio::local::stream_protocol::endpoint(path), ec);
  if (ec) throw ConnectError(path, ec.value());
  return socket;
}

// Connects and writes the request; the socket is then ready for reading the response.
Socket send_request(asio::io_context& io, const std::string& path, const std::string& method,
                    const std::string& target, std::optional<Payload> body, const Headers& headers) {
  const bhttp::verb verb = bhttp::string_to_verb(method);
  if (verb == bhttp::verb::unknown) throw std::invalid_argument("unknown HTTP method '" + method + "'");
  Socket socket = connect_to(io, path);
  beast::error_code ec;

  bhttp::request<bhttp::string_body> req{verb, target, 11};
  req.set(bhttp::field::host, "capsule");
  req.set(bhttp::field::user_agent, "capsule/" CAPSULE_VERSION);
  for (const auto& [name, value] : headers) req.set(name, value);
  if (body) {
    req.set(bhttp::field::content_type, body->content_type);
    req.body() = std::move(body->bytes);
  }
  req.keep_alive(false);
  req.prepare_payload();
  bhttp::write(socket, req, ec);
  if (ec) transport_failure(path, "sending " + method + " " + target, ec);
  return socket;
}

// Returns once `socket` has something to read (or has hung up), handling `watch` each time its fd is readable
// first. Without a watch fd, returns at once: the read that follows blocks instead.
void wait_readable(Socket& socket, const StreamWatch& watch) {
  if (watch.fd < 0) return;
  for (;;) {
    pollfd fds[2] = {{socket.native_handle(), POLLIN, 0}, {watch.fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;  // the read reports what is wrong with the socket
    }
    if (fds[1].revents != 0) watch.on_readable();
    if (fds[0].revents != 0) return;
  }
}

// The socket as a streaming read sees it (a Beast SyncReadStream): every read from the socket waits in
// wait_readable first, so the watch is handled whenever the parser needs more bytes, never mid-buffer.
class WatchedSocket {
 public:
  WatchedSocket(Socket& socket, const StreamWatch& watch) : socket_(socket), watch_(watch) {}
  template <typename Buffers>
  std::size_t read_some(const Buffers& buffers) {
    wait_readable(socket_, watch_);
    return socket_.read_some(buffers);
  }
  template <typename Buffers>
  std::size_t read_some(const Buffers& buffers, beast::error_code& ec) {
    wait_readable(socket_, watch_);
    return socket_.read_some(buffers, ec);
  }

 private:
  Socket& socket_;
  const StreamWatch& watch_;
};

template <typename Body>
void copy_head(const bhttp::response<Body>& message, HttpResponse& out) {
  out.status = static_cast<int>(message.result_int());
  for (const auto& field : message) out.headers[lower(field.name_string())] = std::string(field.value().data(), field.value().size());
}

// Reads a whole response from `socket`.
HttpResponse read_response(Socket& socket, const std::string& path, const std::string& what) {
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  beast::error_code ec;
  bhttp::read(socket, buffer, parser, ec);
  if (ec) transport_failure(path, "reading the response to " + what, ec);
  HttpResponse out;
  copy_head(parser.get(), out);
  out.body = std::move(parser.get().body());
  return out;
}

}  // namespace

ConnectError::ConnectError(const std::string& path, int error)
    : base::Error(base::Cause{"connect", path, error, ""}, "connect_failed",
                  "cannot connect to capsuled at " + path + ": " + std::strerror(error)) {}

void HttpClient::probe() const {
  asio::io_context io;
  connect_to(io, socket_path_);
}

bool ConnectError::nobody_listening() const { return error() == ENOENT || error() == ECONNREFUSED; }

ResponseError::ResponseError(int status, std::string code, const std::string& message)
    : base::Error(base::Cause{"response", "", 0, message}, code, message + " (" + code + ")"), status_(status) {}

HttpResponse HttpClient::request(const std::string& method, const std::string& target, const nlohmann::json& body,
                                 const Headers& headers) const {
  asio::io_context io;
  Socket socket = send_request(io, socket_path_, method, target, json_payload(body), headers);
  return read_response(socket, socket_path_, method + " " + target);
}

HttpResponse HttpClient::request_bytes(const std::string& method, const std::string& target, std::string bytes,
                                       const std::string& content_type) const {
  asio::io_context io;
  Socket socket = send_request(io, socket_path_, method, target, Payload{content_type, std::move(bytes)}, {});
  return read_response(socket, socket_path_, method + " " + target);
}

HttpResponse HttpClient::stream(const std::string& method, const std::string& target, const nlohmann::json& body,
                                const Headers& headers, const ChunkCallback& on_data, const StreamWatch& watch) const {
  asio::io_context io;
  Socket socket = send_request(io, socket_path_, method, target, json_payload(body), headers);
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  beast::error_code ec;
  WatchedSocket watched(socket, watch);
  bhttp::read_header(watched, buffer, parser, ec);
  if (ec) transport_failure(socket_path_, "reading the response to " + method + " " + target, ec);
  HttpResponse out;
  copy_head(parser.get(), out);
  const bool collect = out.status >= 300;

  std::vector<char> buffer_storage(1 << 16);
  char* piece = buffer_storage.data();
  const std::size_t piece_size = buffer_storage.size();
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = piece_size;
    bhttp::read_some(watched, buffer, parser, ec);  // returns as soon as some body bytes are parsed
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) transport_failure(socket_path_, "reading the body of " + method + " " + target, ec);
    const std::size_t n = piece_size - parser.get().body().size;
    if (n == 0) continue;
    if (collect) out.body.append(piece, n);
    else on_data(std::string_view(piece, n));
  }
  return out;
}

HttpResponse HttpClient::stream_lines(const std::string& method, const std::string& target,
                                      const nlohmann::json& body, const Headers& headers,
                                      const ChunkCallback& on_line, const StreamWatch& watch) const {
  std::string pending;  // the start of a line whose '\n' has not arrived yet
  HttpResponse out = stream(method, target, body, headers, [&](std::string_view data) {
    // Lines wholly inside `data` are handed on without copying; only a partial line is kept.
    for (std::size_t newline; (newline = data.find('\n')) != std::string_view::npos;) {
      if (pending.empty()) {
        on_line(data.substr(0, newline));
      } else {
        pending.append(data.substr(0, newline));
        on_line(pending);
        pending.clear();
      }
      data.remove_prefix(newline + 1);
    }
    if (pending.size() + data.size() > kMaxLineBytes) {
      throw std::runtime_error("capsuled sent a line of more than " + std::to_string(kMaxLineBytes >> 20) +
                               " MiB without a newline in the answer to " + method + " " + target);
    }
    pending.append(data);
  }, watch);
  if (!pending.empty()) on_line(pending);
  return out;
}

void throw_if_error(const HttpResponse& response) {
  if (response.status < 400) return;
  const auto body = nlohmann::json::parse(response.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const auto& error = body["error"];
    throw ResponseError(response.status, error.value("code", "http_" + std::to_string(response.status)),
                   error.value("message", std::string("no message")));
  }
  std::string text = response.body.substr(0, 200);
  if (text.empty()) text = "no body";
  throw ResponseError(response.status, "http_" + std::to_string(response.status), "capsuled answered: " + text);
}

nlohmann::json request_json(const HttpClient& client, const std::string& method, const std::string& target,
                            const nlohmann::json& body) {
  const HttpResponse response = client.request(method, target, body);
  throw_if_error(response);
  auto parsed = nlohmann::json::parse(response.body, nullptr, false);
  if (parsed.is_discarded()) {
    throw std::runtime_error("capsuled answered " + method + " " + target + " with a body that is not JSON");
  }
  return parsed;
}

std::string url_encode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || (c != '\0' && std::strchr("-_.~=:,@", c) != nullptr)) {
      out += c;
    } else {
      out += '%';
      out += hex[byte >> 4];
      out += hex[byte & 15];
    }
  }
  return out;
}

}  // namespace capsule::http

// HTTP/1.1 server for capsuled's API over a Unix socket (and loopback TCP), on Boost.Beast: routing, limits,
// timeouts, peer credentials, and responses sent later or streamed as chunks from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/response.h"

namespace capsule::http {

struct CaseInsensitiveLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};

// The connecting process as the kernel saw it at connect time (SO_PEERCRED, and SO_PEERGROUPS for its
// supplementary groups); `known` is false on TCP connections.
struct PeerCredentials {
  bool known = false;
  pid_t pid = 0;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;
};

struct Request {
  std::string method;  // as sent, case-sensitive ("GET")
  std::string target;  // raw request target ("/v1/runs?state=running")
  std::string path;    // percent-decoded path ("/v1/runs")
  std::map<std::string, std::string> query;  // decoded ('+' is a space); a repeated key keeps the last value
  std::map<std::string, std::string, CaseInsensitiveLess> headers;  // repeated fields joined with ", "
  std::string body;
  PeerCredentials peer;
  std::map<std::string, std::string> params;  // from the route pattern's {name} segments, decoded
};

namespace detail {
class Connection;
struct Exchange;
}  // namespace detail

// A chunked response body being sent (Transfer-Encoding: chunked). Thread-safe; usable from any thread for as
// long as it is kept. Dropping the last reference without finish() aborts the connection, so the client sees
// a truncated body instead of a clean end.
class StreamWriter {
 public:
  explicit StreamWriter(std::shared_ptr<detail::Connection> connection);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Queues `chunk` (empty chunks are skipped). False once the client is gone, the connection was closed for
  // being too far behind (ServerOptions::max_stream_buffer_bytes), or finish() was called.
  bool write(std::string chunk);
  // Sends the terminating chunk once everything queued has been written. Idempotent.
  void finish();
  // Calls `callback` once, on the connection's strand, when every chunk queued so far has been sent (soon, if
  // none is queued): a producer writes its next piece then, holding at most one piece in the server. Dropped
  // without being called once the connection closes (releasing what it holds). One callback at a time.
  void when_drained(std::function<void()> callback);
  // True once the client disconnected or a write failed.
  bool client_gone() const;
  // Bytes queued and not yet written to the client (what counts against max_stream_buffer_bytes).
  std::size_t backlog() const;

 private:
  std::shared_ptr<detail::Connection> connection_;
  std::atomic<bool> finished_{false};
};

// The way a handler answers its request: exactly once, with respond() or start_stream(), now or later and from
// any thread. Copies share the same exchange; keep one to answer asynchronously. If every copy is dropped
// without an answer, the client gets 500 internal_error. Calls after the first answer are ignored (logged).
class Responder {
 public:
  explicit Responder(std::shared_ptr<detail::Exchange> exchange);

  void respond(Response response) const;
  std::shared_ptr<StreamWriter> start_stream(unsigned status, const std::string& content_type,
                                             std::vector<std::pair<std::string, std::string>> headers = {}) const;
  // True once the connection is closed (client gone or server stopped); answering then does nothing.
  bool client_gone() const;

 private:
  std::shared_ptr<detail::Exchange> exchange_;
};

// Handlers run on the connection's strand (an io_context thread): long work belongs elsewhere, answering
// through a kept Responder. ApiError thrown from a handler becomes that status and code; any other exception
// becomes 500 internal_error (logged).
using Handler = std::function<void(const Request&, Responder)>;
using SimpleHandler = std::function<Response(const Request&)>;

class Router {
 public:
  // `pattern` is an absolute path whose segments are literals or "{name}" ("/v1/runs/{id}/logs"). A path
  // parameter matches one segment; clients percent-encode a '/' inside it as %2F. A last segment "{name...}"
  // matches one or more remaining segments, joined with '/'. Literal segments win over parameters, and
  // parameters over a rest. Throws std::invalid_argument for a malformed pattern or a duplicate (method, pattern shape).
  void add(std::string method, std::string pattern, Handler handler);
  void add(std::string method, std::string pattern, SimpleHandler handler);

  // (method, pattern) in the order added, e.g. for checking the API reference lists every route.
  std::vector<std::pair<std::string, std::string>> routes() const;

  struct Match {
    const Handler* handler = nullptr;          // set when a route matched
    std::map<std::string, std::string> params;
    std::optional<Response> error;             // 404 not_found, or 405 method_not_allowed with an Allow header
  };
  // `segments` are the decoded path segments ("/v1/runs/x" -> {"v1", "runs", "x"}).
  Match match(std::string_view method, const std::vector<std::string>& segments) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;  // literal text, or "{name}"
    Handler handler;
  };
  std::vector<Route> routes_;
};

// An origin-form request target split and percent-decoded. nullopt for anything else ("*", absolute-form),
// malformed %-escapes, or an encoded NUL byte.
struct ParsedTarget {
  std::string path;
  std::vector<std::string> segments;
  std::map<std::string, std::string> query;
};
std::optional<ParsedTarget> parse_target(std::string_view target);
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);

struct ServerOptions {
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_body_bytes = 1024 * 1024;
  std::chrono::milliseconds header_timeout{10000};  // from the first byte (or accept) to the end of the header
  std::chrono::milliseconds body_timeout{30000};    // from the end of the header to the end of the body
  std::chrono::milliseconds idle_timeout{15000};    // between requests on a kept-alive connection
  std::chrono::milliseconds write_timeout{30000};   // for each write (a response, or one streamed chunk)
  // Beyond it a new connection first closes an idle kept-alive one; with none idle it gets 503 and is closed.
  std::size_t max_connections = 256;
  // Open connections of one non-root Unix-socket peer uid; beyond it 503. 0: unlimited.
  std::size_t max_connections_per_uid = 64;
  std::size_t max_stream_buffer_bytes = 16 * 1024 * 1024;  // unsent streamed bytes before the client is dropped
};

// What the server does with one request's bytes before calling a handler, without a socket: the Beast parser
// with `options`' limits, header checks, target decoding and routing. For the fuzz target and tests.
struct ParsedRequest {
  bool complete = false;            // a whole request was parsed (or an error decided)
  std::optional<Response> error;    // the error response the server would send
  Request request;                  // filled when complete without error
  const Handler* handler = nullptr;
};
ParsedRequest parse_request_bytes(std::string_view bytes, const Router& router, const ServerOptions& options);

namespace detail {
struct ServerState;
}  // namespace detail

// Serves `router` on the caller's io_context, which may be run on any number of threads (each connection is
// serialised on its own strand). The router must outlive the io_context's use of it; destroy the server before
// the io_context.
class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, const Router& router, ServerOptions options = {});
  // As above, keeping the router alive for as long as a connection may still use it.
  HttpServer(boost::asio::io_context& io, std::shared_ptr<const Router> router, ServerOptions options = {});
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on a Unix socket created with `mode` (and `group`, when given). A socket file nobody listens on
  // (a leftover) is replaced; a live one, or any other kind of file, makes this throw std::runtime_error.
  void listen_unix(const std::string& path, mode_t mode, std::optional<gid_t> group);
  // Listens on a loopback address (127.0.0.1, ::1); port 0 picks one. Returns the bound port. Throws
  // std::invalid_argument for a non-loopback address, std::runtime_error when binding fails.
  unsigned short listen_tcp(const std::string& address, unsigned short port);

  // Serves on a socket already bound and listening (e.g. one made inside a sandbox's network namespace),
  // taking ownership of the descriptor (closed on failure too). Throws std::runtime_error if it is unusable.
  void listen_fd(int listening_fd);

  // Stops accepting (and removes the Unix socket files it created), closes connections waiting for a request,
  // and lets responses in flight finish, closing those connections afterwards. Callable from any thread.
  void stop();
  // Connections currently open.
  std::size_t active_connections() const;

 private:
  std::shared_ptr<detail::ServerState> state_;
};

}  // namespace capsule::http

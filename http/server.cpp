// HTTP/1.1 server on Boost.Beast: the per-connection state machine (read with limits and deadlines, dispatch
// through the Router of http_router.cpp, respond or stream chunks, keep-alive), and the Unix/TCP listeners.
#include "http/server.h"

#include "http/error_status.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <system_error>

namespace capsule::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

using Strand = net::strand<net::io_context::executor_type>;
using Socket = net::basic_stream_socket<net::generic::stream_protocol, Strand>;
using Acceptor = net::basic_socket_acceptor<net::generic::stream_protocol, Strand>;
using Timer = net::basic_waitable_timer<std::chrono::steady_clock, net::wait_traits<std::chrono::steady_clock>, Strand>;
using Message = bhttp::request<bhttp::string_body>;
using Parser = bhttp::request_parser<bhttp::string_body>;

std::string errno_text(int error) { return std::generic_category().message(error); }

void configure(Parser& parser, const ServerOptions& options) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(options.max_header_bytes, UINT32_MAX)));
  parser.body_limit(options.max_body_bytes);
}

// The answer to a failed read, or nullopt when the connection should just close (client went away).
std::optional<Response> parse_error_response(const beast::error_code& ec, const ServerOptions& options) {
  if (ec == bhttp::error::header_limit) {
    return error_response("headers_too_large",
                          "the request header exceeds " + std::to_string(options.max_header_bytes) + " bytes");
  }
  if (ec == bhttp::error::body_limit) {
    return error_response("payload_too_large",
                          "the request body exceeds " + std::to_string(options.max_body_bytes) + " bytes");
  }
  if (ec == bhttp::error::bad_version) {  // Beast accepts only HTTP/1.0 and HTTP/1.1
    return error_response("http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are supported");
  }
  if (ec == bhttp::error::end_of_stream || ec.category() != bhttp::make_error_code(bhttp::error::end_of_stream).category()) {
    return std::nullopt;
  }
  return error_response("bad_request", "malformed HTTP request: " + ec.message());
}

// Checks made once the header is in, before the body is read.
std::optional<Response> check_header(const bhttp::request_header<>& header) {
  const auto [first, last] = header.equal_range(bhttp::field::transfer_encoding);
  for (auto field = first; field != last; ++field) {
    auto value = std::string_view(field->value().data(), field->value().size());
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (!beast::iequals(beast::string_view(value.data(), value.size()), "chunked")) {
      return error_response("not_implemented", "Transfer-Encoding '" + std::string(value) + "' is not supported");
    }
  }
  return std::nullopt;
}

// Decoding and routing of a complete request message: the part shared by the server and parse_request_bytes.
ParsedRequest prepare(Message&& message, const Router& router, const PeerCredentials& peer) {
  ParsedRequest out;
  out.complete = true;
  const std::string_view target(message.target().data(), message.target().size());
  auto parsed = parse_target(target);
  if (!parsed) {
    out.error = error_response("bad_request", "malformed request target: " + std::string(target));
    return out;
  }
  const std::string_view method(message.method_string().data(), message.method_string().size());
  auto match = router.match(method, parsed->segments);
  if (match.error) {
    out.error = std::move(match.error);
    return out;
  }
  Request& request = out.request;
  request.method = method;
  request.target = target;
  request.path = std::move(parsed->path);
  request.query = std::move(parsed->query);
  for (const auto& field : message) {
    const std::string name(field.name_string());
    const std::string value(field.value());
    auto [it, inserted] = request.headers.emplace(name, value);
    if (!inserted) it->second += ", " + value;
  }
  request.body = std::move(message.body());
  request.peer = peer;
  request.params = std::move(match.params);
  out.handler = match.handler;
  return out;
}

void build_message(bhttp::response<bhttp::string_body>& message, Response&& response) {
  message.result(response.status);
  message.version(11);
  if (!response.content_type.empty()) message.set(bhttp::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) message.set(name, value);
  message.body() = std::move(response.body);
  message.prepare_payload();
}

}  // namespace

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) < std::tolower(static_cast<unsigned char>(y));
  });
}

ParsedRequest parse_request_bytes(std::string_view bytes, const Router& router, const ServerOptions& options) {
  ParsedRequest out;
  Parser parser;
  configure(parser, options);
  beast::error_code ec;
  bool header_checked = false;
  while (!ec && !parser.is_done() && !bytes.empty()) {
    const auto used = parser.put(net::buffer(bytes.data(), bytes.size()), ec);
    bytes.remove_prefix(used);
    if (ec == bhttp::error::need_more) return out;  // incomplete: the server would wait for more
    if (!ec && parser.is_header_done() && !header_checked) {
      header_checked = true;
      if (auto error = check_header(parser.get())) {
        out.complete = true;
        out.error = std::move(error);
        return out;
      }
      parser.eager(true);
    }
    if (!ec && used == 0) return out;
  }
  if (ec) {
    out.complete = true;
    out.error = parse_error_response(ec, options).value_or(error_response("bad_request", ec.message()));
    return out;
  }
  if (!parser.is_done()) return out;
  return prepare(parser.release(), router, PeerCredentials{});
}

// ---- connections ----

namespace detail {

struct ServerState {
  ServerState(net::io_context& io_context, std::shared_ptr<const Router> owned, const Router& r, ServerOptions o)
      : io(io_context), owned_router(std::move(owned)), router(r), options(std::move(o)) {}
  net::io_context& io;
  const std::shared_ptr<const Router> owned_router;  // set when the server keeps its router alive
  const Router& router;
  const ServerOptions options;
  mutable std::mutex mutex;
  bool stopping = false;
  std::map<const Connection*, std::weak_ptr<Connection>> connections;
  std::map<uid_t, std::size_t> connections_by_uid;  // Unix-socket peers only
  std::vector<std::function<void()>> closers;  // one per listener
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Socket socket, std::shared_ptr<ServerState> state)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), state_(std::move(state)), options_(state_->options) {}
  ~Connection() {
    std::lock_guard lock(state_->mutex);
    state_->connections.erase(this);
    if (counted_uid_ && --state_->connections_by_uid[*counted_uid_] == 0) state_->connections_by_uid.erase(*counted_uid_);
  }

  Strand executor() { return socket_.get_executor(); }
  bool gone() const { return gone_; }

  void start() {
    read_peer_credentials();
    std::optional<Response> refusal;
    std::shared_ptr<Connection> evicted;
    {
      std::lock_guard lock(state_->mutex);
      if (state_->stopping) return close();
      if (state_->connections.size() >= options_.max_connections) evicted = idle_connection_locked();
      if (peer_.known && peer_.uid != 0 && options_.max_connections_per_uid != 0 &&
          state_->connections_by_uid[peer_.uid] >= options_.max_connections_per_uid) {
        refusal = error_response("too_many_connections",
                                 "uid " + std::to_string(peer_.uid) + " has " +
                                     std::to_string(options_.max_connections_per_uid) +
                                     " connections open, the most one user may have; close some");
      } else if (state_->connections.size() >= options_.max_connections && !evicted) {
        refusal = error_response("too_many_connections", "the server has too many open connections");
      }
      state_->connections.emplace(this, weak_from_this());
      if (peer_.known) {
        counted_uid_ = peer_.uid;
        ++state_->connections_by_uid[peer_.uid];
      }
    }
    if (evicted) evicted->post_close_if_idle();
    if (refusal) {
      spdlog::warn("http: refusing a connection: {}", refusal->body);
      return write_response(std::move(*refusal), false);
    }
    arm(options_.header_timeout);
    read_header();
  }

  // At capacity, a kept-alive connection waiting for its next request makes room for a new one, as nginx
  // reuses idle keep-alive connections: idle clients cannot lock everyone else out.
  std::shared_ptr<Connection> idle_connection_locked() {
    for (const auto& [raw, weak] : state_->connections) {
      if (auto connection = weak.lock(); connection && connection->idle_) {
        connection->idle_ = false;  // claimed: the next newcomer picks another
        return connection;
      }
    }
    return nullptr;
  }
  void post_close_if_idle() {
    net::post(executor(), [self = shared_from_this()] {
      if (self->phase_ == Phase::kReading && self->waiting_idle_) self->close();
    });
  }

  void stop() {
    stopping_ = true;
    if (phase_ == Phase::kReading) close();
  }

  // From Exchange and StreamWriter, on any thread.
  void post_response(Response response) {
    net::post(executor(), [self = shared_from_this(), response = std::move(response)]() mutable {
      if (self->phase_ == Phase::kHandling) self->write_response(std::move(response), self->keep_alive_);
    });
  }
  void post_stream_start(unsigned status, std::string content_type, std::vector<std::pair<std::string, std::string>> headers) {
    net::post(executor(), [self = shared_from_this(), status, content_type = std::move(content_type),
                           headers = std::move(headers)]() mutable {
      if (self->phase_ == Phase::kHandling) self->begin_stream(status, content_type, headers);
    });
  }
  bool post_chunk(std::string chunk) {
    const auto size = chunk.size();
    if (stream_backlog_.fetch_add(size) + size > options_.max_stream_buffer_bytes) {
      spdlog::warn("http: dropping a streaming client that fell {} bytes behind", options_.max_stream_buffer_bytes);
      post_abort();
      return false;
    }
    net::post(executor(), [self = shared_from_this(), chunk = std::move(chunk)]() mutable {
      if (self->phase_ != Phase::kStreaming || self->stream_finishing_) return;
      self->stream_pending_ += chunk;
      self->pump();
    });
    return true;
  }
  std::size_t backlog() const { return stream_backlog_.load(); }
  void post_finish() {
    net::post(executor(), [self = shared_from_this()] {
      if (self->phase_ != Phase::kStreaming) return;
      self->stream_finishing_ = true;
      self->pump();
    });
  }
  void post_when_drained(std::function<void()> callback) {
    net::post(executor(), [self = shared_from_this(), callback = std::move(callback)]() mutable {
      if (self->phase_ != Phase::kStreaming || self->stream_finishing_) return;
      self->stream_drained_ = std::move(callback);
      self->pump();
    });
  }
  void post_abort() {
    gone_ = true;
    net::post(executor(), [self = shared_from_this()] {
      if (self->phase_ == Phase::kStreaming) self->close();
    });
  }

 private:
  enum class Phase { kReading, kHandling, kWriting, kStreaming, kClosed };

  struct StreamHead {
    bhttp::response<bhttp::empty_body> message;
    bhttp::response_serializer<bhttp::empty_body> serializer{message};
  };

  void read_peer_credentials() {
    beast::error_code ec;
    if (socket_.local_endpoint(ec).protocol().family() != AF_UNIX || ec) return;
    ucred cred{};
    socklen_t length = sizeof cred;
    if (getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0) {
      peer_ = PeerCredentials{true, cred.pid, cred.uid, cred.gid, {}};
      // Supplementary groups as the kernel recorded them at connect(); a failure leaves none (fewer rights).
      // ERANGE reports the size needed, so a second call with that much room gets them all.
      std::vector<gid_t> groups(64);
      for (int attempt = 0; attempt < 2; ++attempt) {
        socklen_t size = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERGROUPS, groups.data(), &size) == 0) {
          groups.resize(size / sizeof(gid_t));
          peer_.groups = std::move(groups);
          break;
        }
        if (errno != ERANGE || size / sizeof(gid_t) > 65536) break;
        groups.resize(size / sizeof(gid_t));
      }
    }
  }

  // One deadline at a time; a generation number makes a stale expiry harmless.
  void arm(std::chrono::milliseconds timeout) {
    timed_out_ = false;
    const auto generation = ++timer_generation_;
    timer_.expires_after(timeout);
    timer_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->timer_generation_ || self->phase_ == Phase::kClosed) return;
      self->timed_out_ = true;
      beast::error_code ignored;
      if (self->phase_ == Phase::kReading) self->socket_.cancel(ignored);  // the read handler answers 408
      else self->close();                                                // a write stalled
    });
  }
  void disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void wait_for_request() {
    phase_ = Phase::kReading;
    if (buffer_.size() > 0) {
      arm(options_.header_timeout);
      return read_header();
    }
    arm(options_.idle_timeout);
    waiting_idle_ = true;
    idle_ = true;
    socket_.async_wait(net::socket_base::wait_read, [self = shared_from_this()](beast::error_code ec) {
      self->waiting_idle_ = false;
      self->idle_ = false;
      if (self->phase_ == Phase::kClosed) return;
      self->disarm();
      if (ec) return self->close();
      self->arm(self->options_.header_timeout);
      self->read_header();
    });
  }

  void read_header() {
    phase_ = Phase::kReading;
    parser_.emplace();
    configure(*parser_, options_);
    bhttp::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (self->phase_ == Phase::kClosed) return;
      self->disarm();
      if (ec) return self->read_failed(ec);
      self->after_header();
    });
  }

  void after_header() {
    if (auto error = check_header(parser_->get())) return write_response(std::move(*error), false);
    if (parser_->is_done()) return dispatch();
    arm(options_.body_timeout);
    if (beast::iequals(parser_->get()[bhttp::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(socket_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (self->phase_ == Phase::kClosed) return;
        if (ec) return self->read_failed(ec);
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (self->phase_ == Phase::kClosed) return;
      self->disarm();
      if (ec) return self->read_failed(ec);
      self->dispatch();
    });
  }

  void read_failed(const beast::error_code& ec) {
    if (timed_out_) {
      return write_response(error_response("request_timeout", "the request did not arrive in time"), false);
    }
    if (stopping_) return close();
    auto error = parse_error_response(ec, options_);
    if (!error) return close();
    spdlog::debug("http: rejecting a request: {}", ec.message());
    write_response(std::move(*error), false);
  }

  void dispatch() {
    phase_ = Phase::kHandling;
    Message message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    auto prepared = prepare(std::move(message), state_->router, peer_);
    if (prepared.error) return write_response(std::move(*prepared.error), keep_alive_);
    auto exchange = std::make_shared<Exchange>(shared_from_this());
    const Request& request = prepared.request;
    try {
      (*prepared.handler)(request, Responder(exchange));
    } catch (const base::Error& e) {
      if (status_for(e.code()) >= 500) spdlog::error("http: {} {} failed: {}", request.method, request.target, e.what());
      Responder(exchange).respond(error_response(e.code(), e.what()));
    } catch (const std::exception& e) {
      spdlog::error("http: {} {} failed: {}", request.method, request.target, e.what());
      Responder(exchange).respond(error_response("internal_error", e.what()));
    } catch (...) {
      spdlog::error("http: {} {} failed with a non-standard exception", request.method, request.target);
      Responder(exchange).respond(error_response("internal_error", "unknown error"));
    }
  }

  void write_response(Response response, bool keep_alive) {
    phase_ = Phase::kWriting;
    auto message = std::make_shared<bhttp::response<bhttp::string_body>>();
    try {
      build_message(*message, std::move(response));
    } catch (const std::exception& e) {
      spdlog::error("http: cannot send a handler's response: {}", e.what());
      *message = {};
      build_message(*message, error_response("internal_error", "invalid response"));
    }
    keep_alive_ = keep_alive && !stopping_;
    message->keep_alive(keep_alive_);
    arm(options_.write_timeout);
    bhttp::async_write(socket_, *message, [self = shared_from_this(), message](beast::error_code ec, std::size_t) {
      self->written(ec);
    });
  }

  void written(const beast::error_code& ec) {
    if (phase_ == Phase::kClosed) return;
    disarm();
    if (ec || !keep_alive_ || stopping_) return close();
    wait_for_request();
  }

  void begin_stream(unsigned status, const std::string& content_type,
                    const std::vector<std::pair<std::string, std::string>>& headers) {
    auto head = std::make_shared<StreamHead>();
    try {
      head->message.result(status);
      if (!content_type.empty()) head->message.set(bhttp::field::content_type, content_type);
      for (const auto& [name, value] : headers) head->message.set(name, value);
    } catch (const std::exception& e) {
      spdlog::error("http: cannot start a stream: {}", e.what());
      return write_response(error_response("internal_error", "invalid stream response"), false);
    }
    phase_ = Phase::kStreaming;
    keep_alive_ = keep_alive_ && !stopping_;
    head->message.version(11);
    head->message.keep_alive(keep_alive_);
    head->message.chunked(true);
    stream_writing_ = true;
    arm(options_.write_timeout);
    bhttp::async_write_header(socket_, head->serializer, [self = shared_from_this(), head](beast::error_code ec, std::size_t) {
      self->chunk_written(ec, 0);
    });
  }

  // Sends what the writer queued as one chunk, or the last chunk once finishing and drained.
  void pump() {
    if (phase_ != Phase::kStreaming || stream_writing_) return;
    if (!stream_pending_.empty()) {
      stream_inflight_ = std::move(stream_pending_);
      stream_pending_.clear();
      stream_writing_ = true;
      arm(options_.write_timeout);
      net::async_write(socket_, bhttp::make_chunk(net::buffer(stream_inflight_)),
                       [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         self->chunk_written(ec, self->stream_inflight_.size());
                       });
    } else if (stream_finishing_) {
      stream_writing_ = true;
      arm(options_.write_timeout);
      net::async_write(socket_, bhttp::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (self->phase_ == Phase::kClosed) return;
        self->stream_writing_ = self->stream_finishing_ = false;
        self->written(ec);
      });
    } else if (stream_drained_) {
      auto callback = std::move(stream_drained_);
      stream_drained_ = nullptr;
      callback();
    }
  }

  void chunk_written(const beast::error_code& ec, std::size_t bytes) {
    if (phase_ == Phase::kClosed) return;
    disarm();
    stream_writing_ = false;
    stream_backlog_ -= bytes;
    stream_inflight_.clear();
    if (ec) return close();
    pump();
  }

  void close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    gone_ = true;
    disarm();
    beast::error_code ignored;
    socket_.shutdown(net::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
    stream_pending_.clear();
    stream_drained_ = nullptr;  // may hold the producer, which holds this connection through its StreamWriter
  }

  Socket socket_;
  Timer timer_;
  std::shared_ptr<ServerState> state_;
  const ServerOptions& options_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  PeerCredentials peer_;
  Phase phase_ = Phase::kReading;
  bool keep_alive_ = false;
  bool stopping_ = false;
  bool timed_out_ = false;
  std::uint64_t timer_generation_ = 0;
  std::atomic<bool> gone_{false};
  std::atomic<bool> idle_{false};     // between requests, evictable at capacity (read under state_->mutex)
  bool waiting_idle_ = false;         // strand only: the idle wait is in progress
  std::optional<uid_t> counted_uid_;  // counted in state_->connections_by_uid
  std::atomic<std::size_t> stream_backlog_{0};
  std::string stream_pending_;
  std::string stream_inflight_;
  bool stream_writing_ = false;
  bool stream_finishing_ = false;
  std::function<void()> stream_drained_;
};

// The shared state behind a request's Responder copies: answered at most once, 500 if never.
struct Exchange {
  explicit Exchange(std::shared_ptr<Connection> c) : connection(std::move(c)) {}
  ~Exchange() {
    if (answered.exchange(true)) return;
    spdlog::error("http: a handler dropped its request without answering");
    connection->post_response(error_response("internal_error", "the request handler did not answer"));
  }
  bool claim() {
    if (!answered.exchange(true)) return true;
    spdlog::warn("http: a request was answered twice; the second answer is ignored");
    return false;
  }
  std::shared_ptr<Connection> connection;
  std::atomic<bool> answered{false};
};

}  // namespace detail

// ---- Responder and StreamWriter ----

Responder::Responder(std::shared_ptr<detail::Exchange> exchange) : exchange_(std::move(exchange)) {}

void Responder::respond(Response response) const {
  if (exchange_->claim()) exchange_->connection->post_response(std::move(response));
}

std::shared_ptr<StreamWriter> Responder::start_stream(unsigned status, const std::string& content_type,
                                                      std::vector<std::pair<std::string, std::string>> headers) const {
  if (!exchange_->claim()) return std::make_shared<StreamWriter>(nullptr);
  exchange_->connection->post_stream_start(status, content_type, std::move(headers));
  return std::make_shared<StreamWriter>(exchange_->connection);
}

bool Responder::client_gone() const { return exchange_->connection->gone(); }

StreamWriter::StreamWriter(std::shared_ptr<detail::Connection> connection) : connection_(std::move(connection)) {}

StreamWriter::~StreamWriter() {
  if (connection_ && !finished_) connection_->post_abort();
}

bool StreamWriter::write(std::string chunk) {
  if (!connection_ || finished_ || connection_->gone()) return false;
  if (chunk.empty()) return true;
  return connection_->post_chunk(std::move(chunk));
}

void StreamWriter::finish() {
  if (connection_ && !finished_.exchange(true)) connection_->post_finish();
}

void StreamWriter::when_drained(std::function<void()> callback) {
  if (connection_ && !finished_ && !connection_->gone()) connection_->post_when_drained(std::move(callback));
}

std::size_t StreamWriter::backlog() const { return connection_ ? connection_->backlog() : 0; }

bool StreamWriter::client_gone() const { return !connection_ || connection_->gone(); }

// ---- listeners and the server ----

namespace {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(Acceptor acceptor, std::shared_ptr<detail::ServerState> state)
      : acceptor_(std::move(acceptor)), retry_(acceptor_.get_executor()), state_(std::move(state)) {}

  void start() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] { self->accept(); });
  }
  void close() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_.close(ignored);
      self->retry_.cancel();
    });
  }

 private:
  void accept() {
    acceptor_.async_accept(net::make_strand(state_->io), [self = shared_from_this()](beast::error_code ec, Socket socket) {
      if (!self->acceptor_.is_open()) return;
      if (ec) {  // e.g. EMFILE: back off instead of spinning
        spdlog::warn("http: accept failed: {}", ec.message());
        self->retry_.expires_after(std::chrono::milliseconds(100));
        self->retry_.async_wait([self](beast::error_code wait_ec) {
          if (!wait_ec && self->acceptor_.is_open()) self->accept();
        });
        return;
      }
      auto connection = std::make_shared<detail::Connection>(std::move(socket), self->state_);
      net::post(connection->executor(), [connection] { connection->start(); });
      self->accept();
    });
  }

  Acceptor acceptor_;
  Timer retry_;
  std::shared_ptr<detail::ServerState> state_;
};

// Removes a leftover socket file nobody listens on; throws if someone does or the file is not a socket.
void remove_stale_socket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw std::runtime_error("cannot inspect " + path + ": " + errno_text(errno));
  }
  if (!S_ISSOCK(st.st_mode)) throw std::runtime_error(path + " exists and is not a socket; refusing to replace it");
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("cannot create a socket: " + errno_text(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  const int result = connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  ::close(fd);
  if (result == 0 || error == EAGAIN || error == EINPROGRESS) {
    throw std::runtime_error("another process is already listening on " + path);
  }
  if (error != ECONNREFUSED) throw std::runtime_error("cannot check whether " + path + " is in use: " + errno_text(error));
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error("cannot remove the stale socket " + path + ": " + errno_text(errno));
  }
  spdlog::info("http: removed the stale socket {}", path);
}

}  // namespace

HttpServer::HttpServer(net::io_context& io, const Router& router, ServerOptions options)
    : state_(std::make_shared<detail::ServerState>(io, nullptr, router, std::move(options))) {}

HttpServer::HttpServer(net::io_context& io, std::shared_ptr<const Router> router, ServerOptions options)
    : state_(std::make_shared<detail::ServerState>(io, router, *router, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::listen_unix(const std::string& path, mode_t mode, std::optional<gid_t> group) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
    throw std::runtime_error("unusable socket path (empty or longer than 107 bytes): " + path);
  }
  remove_stale_socket(path);
  Acceptor acceptor(net::make_strand(state_->io));
  beast::error_code ec;
  const net::generic::stream_protocol::endpoint endpoint{net::local::stream_protocol::endpoint(path)};
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (ec) throw std::runtime_error("cannot bind " + path + ": " + ec.message());
  // Permissions are set before listen(), so nobody can connect while the socket still has umask permissions.
  auto fail = [&](const std::string& what) {
    const int error = errno;
    unlink(path.c_str());
    throw std::runtime_error(what + " " + path + ": " + errno_text(error));
  };
  if (chmod(path.c_str(), mode) != 0) fail("cannot chmod");
  if (group && chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0) fail("cannot chown");
  acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    unlink(path.c_str());
    throw std::runtime_error("cannot listen on " + path + ": " + ec.message());
  }
  struct stat st {};
  stat(path.c_str(), &st);
  auto listener = std::make_shared<Listener>(std::move(acceptor), state_);
  listener->start();
  std::lock_guard lock(state_->mutex);
  state_->closers.push_back([listener, path, device = st.st_dev, inode = st.st_ino] {
    listener->close();
    struct stat now {};
    if (lstat(path.c_str(), &now) == 0 && now.st_dev == device && now.st_ino == inode) unlink(path.c_str());
  });
}

unsigned short HttpServer::listen_tcp(const std::string& address, unsigned short port) {
  beast::error_code ec;
  const auto ip = net::ip::make_address(address, ec);
  if (ec || !ip.is_loopback()) throw std::invalid_argument("not a loopback address: " + address);
  const net::ip::tcp::endpoint tcp_endpoint(ip, port);
  const net::generic::stream_protocol::endpoint endpoint(tcp_endpoint);
  Acceptor acceptor(net::make_strand(state_->io));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  const auto bound = acceptor.local_endpoint(ec);
  if (ec) throw std::runtime_error("cannot listen on " + address + ":" + std::to_string(port) + ": " + ec.message());
  net::ip::tcp::endpoint bound_tcp;
  std::memcpy(bound_tcp.data(), bound.data(), std::min<std::size_t>(bound.size(), bound_tcp.capacity()));
  auto listener = std::make_shared<Listener>(std::move(acceptor), state_);
  listener->start();
  std::lock_guard lock(state_->mutex);
  state_->closers.push_back([listener] { listener->close(); });
  return bound_tcp.port();
}

void HttpServer::listen_fd(int listening_fd) {
  Acceptor acceptor(net::make_strand(state_->io));
  beast::error_code ec;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (getsockname(listening_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    close(listening_fd);
    throw std::runtime_error("not a socket: " + errno_text(error));
  }
  acceptor.assign(net::generic::stream_protocol(address.ss_family, SOCK_STREAM), listening_fd, ec);
  if (ec) {
    close(listening_fd);
    throw std::runtime_error("cannot serve on the given socket: " + ec.message());
  }
  auto listener = std::make_shared<Listener>(std::move(acceptor), state_);
  listener->start();
  std::lock_guard lock(state_->mutex);
  state_->closers.push_back([listener] { listener->close(); });
}

void HttpServer::stop() {
  std::vector<std::function<void()>> closers;
  std::vector<std::shared_ptr<detail::Connection>> connections;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    closers.swap(state_->closers);
    for (const auto& [raw, weak] : state_->connections) {
      if (auto connection = weak.lock()) connections.push_back(std::move(connection));
    }
  }
  for (const auto& close : closers) close();
  for (const auto& connection : connections) {
    net::post(connection->executor(), [connection] { connection->stop(); });
  }
}

std::size_t HttpServer::active_connections() const {
  std::lock_guard lock(state_->mutex);
  return state_->connections.size();
}

}  // namespace capsule::http

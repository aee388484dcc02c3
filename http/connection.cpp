// One connection's cycle, declared in http/connection.h: admission under the server's limits, reading a request
// against its deadlines, dispatch to the routed handler, a response or a chunked stream, then keep-alive or close.
#include "http/connection.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <exception>

#include "base/error.h"
#include "http/error_status.h"
#include "http/listener.h"
#include "http/responder.h"
#include "http/router.h"

namespace capsule::http::detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

// A stream's status line and headers, kept alive with their serializer until written.
struct StreamHead {
  bhttp::response<bhttp::empty_body> message;
  bhttp::response_serializer<bhttp::empty_body> serializer{message};
};

void build_message(bhttp::response<bhttp::string_body>& message, Response&& response) {
  message.result(response.status);
  message.version(11);
  if (!response.content_type.empty()) message.set(bhttp::field::content_type, response.content_type);
  for (const auto& [name, value] : response.headers) message.set(name, value);
  message.body() = std::move(response.body);
  message.prepare_payload();
}

}  // namespace

Connection::Connection(Socket socket, std::shared_ptr<ServerState> state)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), state_(std::move(state)), options_(state_->options) {}

Connection::~Connection() { state_->forget(this); }

void Connection::start() {
  read_peer_credentials();
  auto admission = state_->admit(shared_from_this(), peer_);
  if (admission.stopping) return close();
  if (admission.evicted) admission.evicted->post_close_if_idle();
  if (admission.refusal) {
    spdlog::warn("http: refusing a connection: {}", admission.refusal->body);
    linger_ = admission.linger;
    return write_response(std::move(*admission.refusal), false);
  }
  arm(options_.header_timeout);  // from accept, through the wait for the first byte
  await_request(true);
}

void Connection::post_close_if_idle() {
  net::post(executor(), [self = shared_from_this()] {
    if (self->phase_ == Phase::kReading && self->waiting_idle_) self->close();
  });
}

void Connection::stop() {
  stopping_ = true;
  if (phase_ == Phase::kReading || phase_ == Phase::kLingering) close();
}

void Connection::post_response(Response response) {
  net::post(executor(), [self = shared_from_this(), response = std::move(response)]() mutable {
    if (self->phase_ == Phase::kHandling) self->write_response(std::move(response), self->keep_alive_);
  });
}

void Connection::post_stream_start(unsigned status, std::string content_type,
                                   std::vector<std::pair<std::string, std::string>> headers) {
  net::post(executor(), [self = shared_from_this(), status, content_type = std::move(content_type),
                         headers = std::move(headers)]() mutable {
    if (self->phase_ == Phase::kHandling) self->begin_stream(status, content_type, headers);
  });
}

bool Connection::post_chunk(std::string chunk) {
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

void Connection::post_finish() {
  net::post(executor(), [self = shared_from_this()] {
    if (self->phase_ != Phase::kStreaming) return;
    self->stream_finishing_ = true;
    self->pump();
  });
}

void Connection::post_when_drained(std::function<void()> callback) {
  net::post(executor(), [self = shared_from_this(), callback = std::move(callback)]() mutable {
    if (self->phase_ != Phase::kStreaming || self->stream_finishing_) return;
    self->stream_drained_ = std::move(callback);
    self->pump();
  });
}

void Connection::post_abort() {
  gone_ = true;
  net::post(executor(), [self = shared_from_this()] {
    if (self->phase_ == Phase::kStreaming) self->close();
  });
}

void Connection::read_peer_credentials() {
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
void Connection::arm(std::chrono::milliseconds timeout) {
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

void Connection::disarm() {
  ++timer_generation_;
  timer_.cancel();
}

void Connection::wait_for_request() {
  phase_ = Phase::kReading;
  if (buffer_.size() > 0) {
    arm(options_.header_timeout);
    return read_header();
  }
  arm(options_.idle_timeout);
  await_request(false);
}

// Waits for a request's first byte, its deadline armed (header_timeout from accept for the first request, else
// idle_timeout). Nothing of the client's is held meanwhile, so the connection is idle: at a connection limit the
// one idle longest is closed to make room. Bytes already there make it busy at once, never idle.
void Connection::await_request(bool first) {
  auto got_bytes = [this, first] {
    if (!first) {
      disarm();
      arm(options_.header_timeout);
    }
    read_header();
  };
  beast::error_code unavailable;
  if (socket_.available(unavailable) > 0 && !unavailable) return got_bytes();
  waiting_idle_ = true;
  idle_ticket_ = state_->next_idle_ticket();
  socket_.async_wait(net::socket_base::wait_read, [self = shared_from_this(), first, got_bytes](beast::error_code ec) {
    self->waiting_idle_ = false;
    self->idle_ticket_ = 0;
    if (self->phase_ == Phase::kClosed) return;
    if (ec && first && self->timed_out_) return self->read_failed(ec);  // 408, as for a header that never ends
    if (ec) return self->close();
    got_bytes();
  });
}

void Connection::read_header() {
  phase_ = Phase::kReading;
  parser_.emplace();
  apply_limits(*parser_, options_);
  bhttp::async_read_header(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (self->phase_ == Phase::kClosed) return;
    self->disarm();
    if (ec) return self->read_failed(ec);
    self->after_header();
  });
}

void Connection::after_header() {
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

void Connection::read_body() {
  bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (self->phase_ == Phase::kClosed) return;
    self->disarm();
    if (ec) return self->read_failed(ec);
    self->dispatch();
  });
}

void Connection::read_failed(const beast::error_code& ec) {
  if (timed_out_) {
    return write_response(error_response("request_timeout", "the request did not arrive in time"), false);
  }
  if (stopping_) return close();
  auto error = read_error_response(ec, options_);
  if (!error) return close();
  spdlog::debug("http: rejecting a request: {}", ec.message());
  write_response(std::move(*error), false);
}

void Connection::dispatch() {
  phase_ = Phase::kHandling;
  RequestMessage message = parser_->release();
  parser_.reset();
  keep_alive_ = message.keep_alive();
  auto prepared = route_request(std::move(message), state_->router, peer_);
  if (prepared.error) return write_response(std::move(*prepared.error), keep_alive_);
  auto exchange = std::make_shared<Exchange>(shared_from_this());
  const Request& request = prepared.request;
  try {
    (*prepared.handler)(request, Responder(exchange));
  } catch (const std::exception& e) {
    const std::string code = error_code_of(e);
    if (status_for(code) >= 500) spdlog::error("http: {} {} failed: {}", request.method, request.target, e.what());
    Responder(exchange).respond(error_response(code, e.what()));
  } catch (...) {
    spdlog::error("http: {} {} failed with a non-standard exception", request.method, request.target);
    Responder(exchange).respond(error_response("internal_error", "unknown error"));
  }
}

void Connection::write_response(Response response, bool keep_alive) {
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

void Connection::written(const beast::error_code& ec) {
  if (phase_ == Phase::kClosed) return;
  disarm();
  if (!ec && linger_ && !stopping_) return linger();
  if (ec || !keep_alive_ || stopping_) return close();
  wait_for_request();
}

// A refusal is written before the client's request is read. Closing then would fail the client's write of it
// (EPIPE; over TCP a reset that can discard the answer) before it reads the 503, so, as nginx's lingering close,
// the request is read and dropped until the client hangs up or refusal_linger passes.
void Connection::linger() {
  if (phase_ != Phase::kLingering) {
    phase_ = Phase::kLingering;
    beast::error_code ignored;
    socket_.shutdown(net::socket_base::shutdown_send, ignored);
    buffer_.clear();
    arm(options_.refusal_linger);
  }
  socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, std::size_t) {
    if (self->phase_ == Phase::kClosed) return;
    if (ec) return self->close();
    self->buffer_.clear();
    self->linger();
  });
}

void Connection::begin_stream(unsigned status, const std::string& content_type,
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
void Connection::pump() {
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

void Connection::chunk_written(const beast::error_code& ec, std::size_t bytes) {
  if (phase_ == Phase::kClosed) return;
  disarm();
  stream_writing_ = false;
  stream_backlog_ -= bytes;
  stream_inflight_.clear();
  if (ec) return close();
  pump();
}

void Connection::close() {
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

}  // namespace capsule::http::detail

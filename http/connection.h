// Internal to http/: one accepted connection's life (admission, read with limits and deadlines, dispatch to a
// handler, a response or a chunked stream, keep-alive and idle wait, close), and the Exchange a Responder holds.
#pragma once

#include <atomic>
#include <boost/asio/basic_stream_socket.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http/request.h"
#include "http/request_parser.h"
#include "http/response.h"
#include "http/server_options.h"

namespace capsule::http::detail {

using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;
using Socket = boost::asio::basic_stream_socket<boost::asio::generic::stream_protocol, Strand>;
using Timer = boost::asio::basic_waitable_timer<std::chrono::steady_clock,
                                                boost::asio::wait_traits<std::chrono::steady_clock>, Strand>;

class ServerState;

// Everything runs on the connection's strand except the post_* calls, which Responder and StreamWriter make
// from any thread. Keeps itself alive through the handlers it has pending.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Socket socket, std::shared_ptr<ServerState> state);
  ~Connection();  // leaves the server's connection table

  Strand executor() { return socket_.get_executor(); }
  bool gone() const { return gone_; }

  // Reads the peer's credentials, takes a place within the server's limits (or answers 503) and reads.
  void start();
  // Nonzero while waiting for a request (its first, or its next kept alive): when it started waiting, in
  // ServerState's order. claim_if_idle(that ticket) is true once, and the connection is then closed to make room.
  std::uint64_t idle_ticket() const { return idle_ticket_.load(); }
  bool claim_if_idle(std::uint64_t ticket) { return idle_ticket_.compare_exchange_strong(ticket, 0); }
  void post_close_if_idle();
  // The server stops: close now if waiting for a request, else after the response in flight.
  void stop();

  // From Exchange and StreamWriter, on any thread.
  void post_response(Response response);
  void post_stream_start(unsigned status, std::string content_type,
                         std::vector<std::pair<std::string, std::string>> headers);
  bool post_chunk(std::string chunk);
  std::size_t backlog() const { return stream_backlog_.load(); }
  void post_finish();
  void post_when_drained(std::function<void()> callback);
  void post_abort();

 private:
  enum class Phase { kReading, kHandling, kWriting, kStreaming, kLingering, kClosed };

  void read_peer_credentials();
  void arm(std::chrono::milliseconds timeout);
  void disarm();
  void wait_for_request();
  void await_request(bool first);
  void linger();
  void read_header();
  void after_header();
  void read_body();
  void read_failed(const boost::beast::error_code& ec);
  void dispatch();
  void write_response(Response response, bool keep_alive);
  void written(const boost::beast::error_code& ec);
  void begin_stream(unsigned status, const std::string& content_type,
                    const std::vector<std::pair<std::string, std::string>>& headers);
  void pump();
  void chunk_written(const boost::beast::error_code& ec, std::size_t bytes);
  void close();

  Socket socket_;
  Timer timer_;
  std::shared_ptr<ServerState> state_;
  const ServerOptions& options_;
  boost::beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  PeerCredentials peer_;
  Phase phase_ = Phase::kReading;
  bool keep_alive_ = false;
  bool stopping_ = false;
  bool timed_out_ = false;
  std::uint64_t timer_generation_ = 0;
  std::atomic<bool> gone_{false};
  std::atomic<std::uint64_t> idle_ticket_{0};  // see idle_ticket()
  bool waiting_idle_ = false;         // strand only: the wait for a request's first byte is in progress
  bool linger_ = false;               // a refusal: read and drop the request after answering (linger())
  std::atomic<std::size_t> stream_backlog_{0};
  std::string stream_pending_;
  std::string stream_inflight_;
  bool stream_writing_ = false;
  bool stream_finishing_ = false;
  std::function<void()> stream_drained_;
};

// The shared state behind a request's Responder copies: answered at most once, 500 if never (responder.cpp).
struct Exchange {
  explicit Exchange(std::shared_ptr<Connection> c);
  ~Exchange();
  // True for the first answer; later ones are logged and ignored.
  bool claim();
  std::shared_ptr<Connection> connection;
  std::atomic<bool> answered{false};
};

}  // namespace capsule::http::detail

// Internal to http/: what one HttpServer's listeners and connections share (ServerState): the router and
// options, the accept loops, and the table of open connections behind the connection limits, eviction and stop().
#pragma once

#include <sys/types.h>

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "http/connection.h"
#include "http/request.h"
#include "http/response.h"
#include "http/router.h"
#include "http/server_options.h"

namespace capsule::http::detail {

using Acceptor = boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol, Strand>;

// Thread-safe. Connections hold it (shared) and leave its table when they are destroyed.
class ServerState : public std::enable_shared_from_this<ServerState> {
 public:
  ServerState(boost::asio::io_context& io, std::shared_ptr<const Router> owned_router, const Router& router,
              ServerOptions options);

  boost::asio::io_context& io;
  const Router& router;
  const ServerOptions options;

  // Accepts connections on `acceptor` (already listening) until stop(); `after_close` runs once it is closed.
  void serve(Acceptor acceptor, std::function<void()> after_close = {});

  // A new connection's place among the open ones, decided under ServerOptions' limits.
  struct Admission {
    bool stopping = false;                // the server is stopping: close at once (not registered)
    // Answer this (503) and close; registered until destroyed (stop() reaches it) but not counted in the limits.
    std::optional<Response> refusal;
    bool linger = false;                  // with the refusal: read and drop the request first (refusal_linger)
    std::shared_ptr<Connection> evicted;  // the connection idle longest, to close to make room
    // The connections the search for `evicted` held: released by the caller, after mutex_, because the last
    // reference to one may be among them and a connection's destructor takes mutex_ (forget).
    std::vector<std::shared_ptr<Connection>> looked_at;
  };
  Admission admit(const std::shared_ptr<Connection>& connection, const PeerCredentials& peer);
  // Called by a connection's destructor.
  void forget(const Connection* connection);
  // Orders idle connections: a connection takes one each time it starts waiting for a request, and at a limit
  // the one holding the smallest (idle longest) is closed first.
  std::uint64_t next_idle_ticket() { return ++idle_tickets_; }

  // Closes the listeners and asks every open connection to stop (see HttpServer::stop).
  void stop();
  std::size_t active_connections() const;

 private:
  struct Entry {
    std::weak_ptr<Connection> connection;
    bool counted = false;      // in counted_ (admitted, not refused)
    std::optional<uid_t> uid;  // counted in connections_by_uid_ (admitted Unix-socket peers only)
    bool lingers = false;      // a refusal reading its request, in lingering_
  };
  // Claims the connection idle longest (of `uid` only, when given); null when none is idle. Every connection it
  // looks at is appended to `looked_at`, which must outlive the lock on mutex_.
  std::shared_ptr<Connection> claim_oldest_idle_locked(std::optional<uid_t> uid,
                                                       std::vector<std::shared_ptr<Connection>>& looked_at);

  const std::shared_ptr<const Router> owned_router_;  // set when the server keeps its router alive
  mutable std::mutex mutex_;
  bool stopping_ = false;
  std::map<const Connection*, Entry> connections_;
  std::size_t counted_ = 0;    // admitted connections: what max_connections limits
  std::size_t lingering_ = 0;  // refusals reading their request; at most max_connections, else closed at once
  std::map<uid_t, std::size_t> connections_by_uid_;
  std::atomic<std::uint64_t> idle_tickets_{0};
  std::vector<std::function<void()>> closers_;  // one per listener
};

}  // namespace capsule::http::detail

// The accept loop (backing off when accept fails, e.g. EMFILE) and ServerState's connection table: the global
// and per-uid connection limits, eviction of idle kept-alive connections at capacity, and stopping everything.
#include "http/listener.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <string>

namespace capsule::http::detail {

namespace net = boost::asio;
namespace beast = boost::beast;

namespace {

// One listening socket's accept loop; each accepted socket becomes a Connection on its own strand.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(Acceptor acceptor, std::shared_ptr<ServerState> state)
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
      auto connection = std::make_shared<Connection>(std::move(socket), self->state_);
      net::post(connection->executor(), [connection] { connection->start(); });
      self->accept();
    });
  }

  Acceptor acceptor_;
  Timer retry_;
  std::shared_ptr<ServerState> state_;
};

}  // namespace

ServerState::ServerState(net::io_context& io_context, std::shared_ptr<const Router> owned_router,
                         const Router& served_router, ServerOptions server_options)
    : io(io_context), router(served_router), options(std::move(server_options)), owned_router_(std::move(owned_router)) {}

void ServerState::serve(Acceptor acceptor, std::function<void()> after_close) {
  auto listener = std::make_shared<Listener>(std::move(acceptor), shared_from_this());
  listener->start();
  std::lock_guard lock(mutex_);
  closers_.push_back([listener, after_close = std::move(after_close)] {
    listener->close();
    if (after_close) after_close();
  });
}

ServerState::Admission ServerState::admit(const std::shared_ptr<Connection>& connection, const PeerCredentials& peer) {
  Admission admission;
  std::lock_guard lock(mutex_);
  if (stopping_) {
    admission.stopping = true;
    return admission;
  }
  if (connections_.size() >= options.max_connections) admission.evicted = claim_idle_connection_locked();
  if (peer.known && peer.uid != 0 && options.max_connections_per_uid != 0 &&
      connections_by_uid_[peer.uid] >= options.max_connections_per_uid) {
    admission.refusal = error_response("too_many_connections",
                                       "uid " + std::to_string(peer.uid) + " has " +
                                           std::to_string(options.max_connections_per_uid) +
                                           " connections open, the most one user may have; close some");
  } else if (connections_.size() >= options.max_connections && !admission.evicted) {
    admission.refusal = error_response("too_many_connections", "the server has too many open connections");
  }
  Entry entry{connection, std::nullopt};
  if (peer.known) {
    entry.uid = peer.uid;
    ++connections_by_uid_[peer.uid];
  }
  connections_.emplace(connection.get(), std::move(entry));
  return admission;
}

// At capacity, a kept-alive connection waiting for its next request makes room for a new one, as nginx
// reuses idle keep-alive connections: idle clients cannot lock everyone else out.
std::shared_ptr<Connection> ServerState::claim_idle_connection_locked() {
  for (const auto& [raw, entry] : connections_) {
    if (auto connection = entry.connection.lock(); connection && connection->claim_if_idle()) {
      return connection;  // claimed: the next newcomer picks another
    }
  }
  return nullptr;
}

void ServerState::forget(const Connection* connection) {
  std::lock_guard lock(mutex_);
  const auto found = connections_.find(connection);
  if (found == connections_.end()) return;
  if (const auto uid = found->second.uid; uid && --connections_by_uid_[*uid] == 0) connections_by_uid_.erase(*uid);
  connections_.erase(found);
}

void ServerState::stop() {
  std::vector<std::function<void()>> closers;
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    closers.swap(closers_);
    for (const auto& [raw, entry] : connections_) {
      if (auto connection = entry.connection.lock()) connections.push_back(std::move(connection));
    }
  }
  for (const auto& close : closers) close();
  for (const auto& connection : connections) {
    net::post(connection->executor(), [connection] { connection->stop(); });
  }
}

std::size_t ServerState::active_connections() const {
  std::lock_guard lock(mutex_);
  return connections_.size();
}

}  // namespace capsule::http::detail

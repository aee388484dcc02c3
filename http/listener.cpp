// The accept loop (backing off when accept fails, e.g. EMFILE) and ServerState's connection table: the global and
// per-uid connection limits, where the connection idle longest makes room, refusals uncounted; stopping everything.
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
  // At a limit the connection idle longest makes room, as nginx reuses idle connections: idle clients (those
  // that sent nothing yet too) cannot lock anyone out. A uid at its own limit gives way among its own
  // connections only, which frees a place in the server's too; busy ones are never closed for a newcomer.
  const bool per_uid = peer.known && peer.uid != 0 && options.max_connections_per_uid != 0;
  if (per_uid && connections_by_uid_[peer.uid] >= options.max_connections_per_uid) {
    admission.evicted = claim_oldest_idle_locked(peer.uid, admission.looked_at);
    if (!admission.evicted) {
      admission.refusal = error_response("too_many_connections",
                                         "uid " + std::to_string(peer.uid) + " has " +
                                             std::to_string(options.max_connections_per_uid) +
                                             " connections open, the most one user may have; close some");
    }
  }
  if (!admission.refusal && !admission.evicted && counted_ >= options.max_connections) {
    admission.evicted = claim_oldest_idle_locked(std::nullopt, admission.looked_at);
    if (!admission.evicted) {
      admission.refusal = error_response("too_many_connections", "the server has too many open connections");
    }
  }
  Entry entry;
  entry.connection = connection;
  if (admission.refusal) {
    // Not counted: a flood of refused connections must not fill the limits it is refused by. How many linger
    // is bounded; beyond that a refusal is written and closed at once.
    admission.linger = entry.lingers = lingering_ < options.max_connections;
    if (entry.lingers) ++lingering_;
  } else {
    entry.counted = true;
    ++counted_;
    if (peer.known) {
      entry.uid = peer.uid;
      ++connections_by_uid_[peer.uid];
    }
  }
  connections_.emplace(connection.get(), std::move(entry));
  return admission;
}

std::shared_ptr<Connection> ServerState::claim_oldest_idle_locked(std::optional<uid_t> uid,
                                                                  std::vector<std::shared_ptr<Connection>>& looked_at) {
  // Held in looked_at, not in temporaries: one whose other owners let go meanwhile would otherwise be destroyed
  // here, and its destructor's forget() would wait for the mutex this thread holds.
  const std::size_t first = looked_at.size();
  for (const auto& [raw, entry] : connections_) {
    if (!entry.counted || (uid && entry.uid != uid)) continue;
    if (auto candidate = entry.connection.lock()) looked_at.push_back(std::move(candidate));
  }
  // A claim fails when its connection stopped being idle since it was looked at: look again (each failure means
  // a connection went busy, so this ends).
  for (std::size_t attempt = 0; attempt <= looked_at.size() - first; ++attempt) {
    const std::shared_ptr<Connection>* oldest = nullptr;
    std::uint64_t oldest_ticket = 0;
    for (std::size_t i = first; i < looked_at.size(); ++i) {
      const std::uint64_t ticket = looked_at[i]->idle_ticket();
      if (ticket != 0 && (!oldest || ticket < oldest_ticket)) {
        oldest = &looked_at[i];
        oldest_ticket = ticket;
      }
    }
    if (!oldest) return nullptr;
    if ((*oldest)->claim_if_idle(oldest_ticket)) return *oldest;  // claimed: the next newcomer picks another
  }
  return nullptr;
}

void ServerState::forget(const Connection* connection) {
  std::lock_guard lock(mutex_);
  const auto found = connections_.find(connection);
  if (found == connections_.end()) return;
  const Entry& entry = found->second;
  if (entry.counted) --counted_;
  if (entry.lingers) --lingering_;
  if (entry.uid && --connections_by_uid_[*entry.uid] == 0) connections_by_uid_.erase(*entry.uid);
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

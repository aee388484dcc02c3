// A session's network switched between execs: its package proxy's listener in the box's own network namespace
// stops listening (shutdown(2): connections to it are refused, the port stays the daemon's) and listens again.
#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "daemon/sessions/session_manager.h"
#include "daemon/sessions/session_state.h"
#include "http/response.h"

namespace capsule::daemon {
namespace {

constexpr const char* kNetworkOn = "proxy";
constexpr const char* kNetworkOff = "none";

base::UniqueFd duplicate_listener(const base::UniqueFd& fd) {
  base::UniqueFd copy(fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
  if (!copy) throw std::runtime_error(std::string("duplicating the proxy's listener: ") + std::strerror(errno));
  return copy;
}

// A listening TCP socket shut down is closed for connections (the kernel refuses them) but keeps its port bound;
// without SO_REUSEADDR no other socket may bind that port meanwhile (not even with SO_REUSEADDR or SO_REUSEPORT
// of its own), so only this daemon listens there again.
void stop_listening(const std::vector<base::UniqueFd>& listeners) {
  for (const auto& fd : listeners) {
    const int off = 0;
    if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &off, sizeof off) != 0) {
      throw std::runtime_error(std::string("keeping the proxy's port: ") + std::strerror(errno));
    }
    if (shutdown(fd.get(), SHUT_RDWR) != 0 && errno != ENOTCONN) {
      throw std::runtime_error(std::string("stopping the proxy's listener: ") + std::strerror(errno));
    }
  }
}

}  // namespace

std::shared_ptr<RunProxy> SessionManager::serve_proxy_listeners(Session& session, std::vector<base::UniqueFd> listeners) {
  session.proxy_listeners.clear();
  if (!session.cutoff || listeners.empty()) return nullptr;
  for (const auto& fd : listeners) session.proxy_listeners.push_back(duplicate_listener(fd));
  bool online;
  {
    std::lock_guard lock(mutex_);
    online = session.network == kNetworkOn;
  }
  if (!online) {  // switched off before a reset: the new box starts off too
    listeners.clear();
    stop_listening(session.proxy_listeners);
    return nullptr;
  }
  return std::make_shared<RunProxy>(*options_.proxies.io, *options_.proxies.proxy, *session.cutoff, std::move(listeners));
}

nlohmann::json SessionManager::set_network(const std::string& id, bool online) {
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    session = live_session_locked(id);
  }
  const std::string wanted = online ? kNetworkOn : kNetworkOff;
  on_loop([&] {
    // All under the lock exec() accepts under: an exec accepted after the switch runs (and says it ran) with it.
    std::shared_ptr<RunProxy> stopped;  // destroyed after the lock: its own listener closes before ours shuts down
    {
      std::lock_guard lock(mutex_);
      switch (session->phase) {
        case Phase::kReady: break;
        case Phase::kFrozen: throw http::ApiError("session_frozen", "session " + id + " is frozen");
        case Phase::kStarting: throw http::ApiError("conflict", "session " + id + " is being reset; retry");
        case Phase::kEnding:
        case Phase::kEnded: throw http::ApiError("session_ended", "session " + id + " has ended");
      }
      if (session->network == wanted) return;
      if (session->proxy_listeners.empty()) {
        const std::string why = session->spec.environment.network == kNetworkOn
                                    ? "its box shares a stack's network namespace, whose proxy another box serves"
                                    : "it was created with network \"none\": its box has no proxy to switch on";
        throw http::ApiError("invalid_request", "session " + id + ": " + why);
      }
      if (session->execs_running > 0) {
        throw http::ApiError("execs_running", "session " + id + " has " + std::to_string(session->execs_running) +
                                                " execs queued or running; switch its network between execs");
      }
      if (!online) {
        stopped.swap(session->proxy);
        session->network = wanted;
      } else {
        for (const auto& fd : session->proxy_listeners) {
          if (listen(fd.get(), SOMAXCONN) == 0) continue;
          const int error = errno;
          if (error == EADDRINUSE) {  // not expected: the port stayed bound (stop_listening)
            throw http::ApiError("conflict", "session " + id + ": a process in the box listens on the proxy's port " +
                                                 std::to_string(kRunProxyPort) + "; end it and switch again");
          }
          throw std::runtime_error(std::string("listening again for the proxy: ") + std::strerror(error));
        }
        std::vector<base::UniqueFd> serving;
        for (const auto& fd : session->proxy_listeners) serving.push_back(duplicate_listener(fd));
        session->proxy = std::make_shared<RunProxy>(*options_.proxies.io, *options_.proxies.proxy, *session->cutoff,
                                                    std::move(serving));
        session->network = wanted;
      }
    }
    stopped.reset();
    if (!online) stop_listening(session->proxy_listeners);
  });
  std::lock_guard lock(mutex_);
  return session_json_locked(*session);
}

}  // namespace capsule::daemon

// One thread per published port: poll() over the listener and every relayed pair, 64 KiB buffered each way, idle
// pairs closed after the idle timeout or, at the cap, the one idle longest for a newcomer. The listener is made
// in the daemon's namespace and each outgoing socket in the stack's (the thread switches with setns, for itself).
#include "daemon/stacks/port_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <list>
#include <string>
#include <vector>

#include "base/error.h"
#include "sandbox/net_namespace.h"

namespace capsule::daemon {
namespace {

constexpr std::size_t kBuffer = 64 * 1024;

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

[[noreturn]] void fail(const std::string& what) {
  throw base::Error("internal_error", "publishing a port: " + what + ": " + std::strerror(errno));
}

// One direction of a relayed connection: bytes read from `from`, not yet written to `to`.
struct Flow {
  std::string pending;
  bool eof = false;  // `from` said EOF: once pending is written, `to` is shut for writing
};

using Clock = std::chrono::steady_clock;

struct Pair {
  base::UniqueFd client, service;
  bool connected = false;  // the service side's non-blocking connect has completed
  Flow up, down;           // client -> service, service -> client
  Clock::time_point active = Clock::now();  // accepted, or the last byte either way: idle since then
  bool done() const { return up.eof && down.eof && up.pending.empty() && down.pending.empty(); }
};

// Reads what `from` has (when the flow has room) and writes what is pending to `to`; `moved` is set when a byte
// (or EOF) went either way. False: the pair is broken.
bool pump(int from, int to, Flow& flow, short from_events, short to_events, bool& moved) {
  if ((from_events & (POLLIN | POLLHUP | POLLERR)) && !flow.eof && flow.pending.size() < kBuffer) {
    char buffer[16384];
    const ssize_t got = recv(from, buffer, std::min(sizeof buffer, kBuffer - flow.pending.size()), 0);
    if (got > 0) flow.pending.append(buffer, static_cast<std::size_t>(got));
    else if (got == 0) flow.eof = true;
    else if (errno != EAGAIN && errno != EINTR) return false;
    moved = moved || got >= 0;
  }
  if (!flow.pending.empty() && (to_events & POLLOUT)) {
    const ssize_t put = send(to, flow.pending.data(), flow.pending.size(), MSG_NOSIGNAL);
    if (put > 0) flow.pending.erase(0, static_cast<std::size_t>(put));
    else if (put < 0 && errno != EAGAIN && errno != EINTR) return false;
    moved = moved || put > 0;
  }
  if (flow.eof && flow.pending.empty()) shutdown(to, SHUT_WR);
  return true;
}

// How long poll() may wait: until the first pair's idle timeout (-1: no pair, no deadline).
int poll_timeout_ms(const std::list<Pair>& pairs, std::chrono::milliseconds idle_timeout) {
  if (pairs.empty()) return -1;
  Clock::time_point oldest = Clock::time_point::max();
  for (const Pair& pair : pairs) oldest = std::min(oldest, pair.active);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(oldest + idle_timeout - Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 60'000));
}

}  // namespace

PortRelay::PortRelay(const std::string& network_namespace, std::uint16_t port, std::uint16_t host_port,
                     PortRelayLimits limits)
    : port_(port), limits_(limits) {
  host_network_.reset(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));  // the main thread's: the daemon's own
  if (!host_network_) fail("open /proc/self/ns/net");
  stack_network_ = sandbox::open_network_namespace(network_namespace);
  stop_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_) fail("eventfd");
  // The listener is made by a short-lived thread in the daemon's namespace: this thread may be a stack's.
  std::string error;
  std::thread maker([&] {
    if (setns(host_network_.get(), CLONE_NEWNET) != 0) {
      error = std::string("setns: ") + std::strerror(errno);
      return;
    }
    listener_.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    const sockaddr_in address = loopback(host_port);
    if (!listener_ || bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        listen(listener_.get(), 64) != 0) {
      error = "127.0.0.1:" + std::to_string(host_port) + ": " + std::strerror(errno);
    }
  });
  maker.join();
  if (!error.empty()) throw base::Error("conflict", "publishing port " + std::to_string(port) + " on the host: " + error);
  sockaddr_in bound{};
  socklen_t length = sizeof bound;
  getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  host_port_ = ntohs(bound.sin_port);
  thread_ = std::thread([this] { serve(); });
}

PortRelay::~PortRelay() {
  const std::uint64_t one = 1;
  if (write(stop_.get(), &one, sizeof one) < 0) {
    // An eventfd write fails only past 2^64-1 pending: cannot happen here.
  }
  if (thread_.joinable()) thread_.join();
}

void PortRelay::serve() {
  // Outgoing sockets are made in the stack's namespace: this thread lives there from now on.
  if (setns(stack_network_.get(), CLONE_NEWNET) != 0) return;
  std::list<Pair> pairs;
  for (;;) {
    // The listener is always asked: at the cap a newcomer closes the pair idle longest (below).
    std::vector<pollfd> wanted = {{stop_.get(), POLLIN, 0}, {listener_.get(), POLLIN, 0}};
    // A side is read while its flow has room and has not ended (a socket at EOF is always readable: asking for
    // POLLIN then would spin), written while bytes wait for it.
    auto events = [](const Flow& reading, const Flow& writing) {
      return static_cast<short>((!reading.eof && reading.pending.size() < kBuffer ? POLLIN : 0) |
                                (writing.pending.empty() ? 0 : POLLOUT));
    };
    // A side with nothing asked of it is left out (fd -1): poll reports POLLHUP and POLLERR unasked, which would
    // spin on a side that can neither be read nor written now.
    auto entry = [](int fd, short asked) { return pollfd{asked != 0 ? fd : -1, asked, 0}; };
    for (const Pair& pair : pairs) {
      wanted.push_back(entry(pair.client.get(), pair.connected ? events(pair.up, pair.down) : short{0}));
      wanted.push_back(entry(pair.service.get(), pair.connected ? events(pair.down, pair.up) : short{POLLOUT}));
    }
    if (poll(wanted.data(), wanted.size(), poll_timeout_ms(pairs, limits_.idle_timeout)) < 0 && errno != EINTR) return;
    if (wanted[0].revents != 0) return;  // stopping: every pair closes with the list
    const Clock::time_point now = Clock::now();
    std::size_t next = 2;
    for (auto it = pairs.begin(); it != pairs.end(); next += 2) {
      Pair& pair = *it;
      const short client_events = wanted[next].revents;
      const short service_events = wanted[next + 1].revents;
      bool ok = true;
      if (!pair.connected && service_events != 0) {
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(pair.service.get(), SOL_SOCKET, SO_ERROR, &error, &length);
        ok = error == 0;  // refused: the client sees its connection closed, as with nothing listening
        pair.connected = ok;
      } else if (pair.connected) {
        bool moved = false;
        ok = pump(pair.client.get(), pair.service.get(), pair.up, client_events, service_events, moved) &&
             pump(pair.service.get(), pair.client.get(), pair.down, service_events, client_events, moved);
        if (moved) pair.active = now;
        // A side closed both ways (POLLHUP) once all it sent has passed on, or an error on either: the pair ends.
        const bool client_gone = (client_events & POLLHUP) && pair.up.eof && pair.up.pending.empty();
        const bool service_gone = (service_events & POLLHUP) && pair.down.eof && pair.down.pending.empty();
        if (((client_events | service_events) & POLLERR) || client_gone || service_gone) ok = false;
      }
      // Idle (no byte either way, stalled buffers too) for the idle timeout: closed, as a proxy's tunnel timeout.
      if (now - pair.active >= limits_.idle_timeout) ok = false;
      it = ok && !pair.done() ? std::next(it) : pairs.erase(it);
    }
    if (wanted[1].revents & POLLIN) {
      base::UniqueFd client(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!client) {
        // Out of descriptors (or memory): the connection waits in the backlog while the rest of the daemon
        // frees some; polling the listener again at once would spin.
        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) poll(wanted.data(), 1, 100);
        continue;
      }
      if (!pairs.empty() && pairs.size() >= limits_.max_connections) {
        // Full: the pair idle longest makes room (its client sees its connection closed).
        pairs.erase(std::min_element(pairs.begin(), pairs.end(),
                                     [](const Pair& a, const Pair& b) { return a.active < b.active; }));
      }
      base::UniqueFd service(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      const sockaddr_in address = loopback(port_);
      if (service && (connect(service.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 ||
                      errno == EINPROGRESS)) {
        Pair& pair = pairs.emplace_back();
        pair.client = std::move(client);
        pair.service = std::move(service);
      }
    }
  }
}

}  // namespace capsule::daemon

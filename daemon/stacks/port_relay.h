// PortRelay: a service port published on the host's loopback (a stack service's `publish`), as `docker run -p
// 127.0.0.1:P:port` does: capsuled accepts on the host side and relays each connection to the port inside the
// stack's network namespace. Nothing else of a stack is reachable from the host.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "base/unique_fd.h"

namespace capsule::daemon {

struct PortRelayLimits {
  // Relayed at once. A connection beyond it closes the pair idle longest to make room, as a proxy reuses idle
  // connections: connections that send nothing cannot lock the stack's owner out.
  std::size_t max_connections = 64;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};  // no byte either way this long: closed
};

class PortRelay {
 public:
  // Listens on 127.0.0.1:host_port of the host (0: a free port the kernel picks) and relays to 127.0.0.1:port in
  // the namespace at `network_namespace`. Throws base::Error when the host port cannot be had.
  PortRelay(const std::string& network_namespace, std::uint16_t port, std::uint16_t host_port,
            PortRelayLimits limits = {});
  ~PortRelay();  // stops accepting, closes every relayed connection, joins its thread
  PortRelay(const PortRelay&) = delete;
  PortRelay& operator=(const PortRelay&) = delete;

  std::uint16_t host_port() const { return host_port_; }

 private:
  void serve();

  base::UniqueFd host_network_;   // the namespace the listener lives in (the daemon's)
  base::UniqueFd stack_network_;  // where the relayed connections go
  base::UniqueFd listener_;
  base::UniqueFd stop_;           // eventfd: the destructor's signal
  std::uint16_t port_ = 0;
  std::uint16_t host_port_ = 0;
  PortRelayLimits limits_;
  std::thread thread_;
};

}  // namespace capsule::daemon

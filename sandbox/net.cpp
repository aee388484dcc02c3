// Brings up "lo" with SIOCSIFFLAGS (the namespace has no other interface, route or address), and opens loopback
// listeners inside a sandbox's network namespace from a thread that joined it.
#include "sandbox/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "sandbox/error.h"

namespace capsule::sandbox {

void bring_up_loopback() {
  base::UniqueFd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) throw_errno("net", "lo", "socket");
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(sock.get(), SIOCGIFFLAGS, &request) != 0) throw_errno("net", "lo", "SIOCGIFFLAGS");
  request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP | IFF_RUNNING);
  if (ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0) throw_errno("net", "lo", "SIOCSIFFLAGS");
}

namespace {

base::UniqueFd listen_on_loopback(std::uint16_t port) {
  const std::string where = "127.0.0.1:" + std::to_string(port);
  base::UniqueFd sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock) throw_errno("net", where, "socket");
  const int on = 1;
  setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(sock.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    throw_errno("net", where, "bind");
  if (listen(sock.get(), SOMAXCONN) != 0) throw_errno("net", where, "listen");
  return sock;
}

}  // namespace

std::vector<base::UniqueFd> listen_in_network_namespace(pid_t pid, const std::vector<std::uint16_t>& ports) {
  std::vector<base::UniqueFd> listeners;
  if (ports.empty()) return listeners;
  const std::string ns_path = "/proc/" + std::to_string(pid) + "/ns/net";
  base::UniqueFd netns(open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!netns) throw_errno("net", ns_path, "open");
  std::exception_ptr failure;
  std::thread joiner([&] {
    try {
      if (setns(netns.get(), CLONE_NEWNET) != 0) throw_errno("net", ns_path, "setns");
      bring_up_loopback();
      for (const auto port : ports) listeners.push_back(listen_on_loopback(port));
    } catch (...) {
      failure = std::current_exception();
    }
  });
  joiner.join();
  if (failure) std::rethrow_exception(failure);
  return listeners;
}

}  // namespace capsule::sandbox

// Brings up "lo" with SIOCSIFFLAGS; the namespace has no other interface, route or address.
// Needs CAP_NET_ADMIN over the network namespace, which capsule-init holds until it drops privileges.
#include "sandbox/net.h"

#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "sandbox/error.h"
#include "sandbox/unique_fd.h"

namespace capsule::sandbox {

void bring_up_loopback() {
  UniqueFd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock) throw_errno("net", "lo", "socket");
  ifreq request{};
  std::strncpy(request.ifr_name, "lo", IFNAMSIZ - 1);
  if (ioctl(sock.get(), SIOCGIFFLAGS, &request) != 0) throw_errno("net", "lo", "SIOCGIFFLAGS");
  request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP | IFF_RUNNING);
  if (ioctl(sock.get(), SIOCSIFFLAGS, &request) != 0) throw_errno("net", "lo", "SIOCSIFFLAGS");
}

}  // namespace capsule::sandbox

// The one-shot pairing of a box and its exec behind one poll interface, and the private poll loop that
// Launcher::run uses (Run = start + await).
#include "sandbox/supervisor.h"

#include <cerrno>

#include "sandbox/command.h"
#include "sandbox/error.h"

namespace capsule::sandbox {

std::vector<pollfd> Supervisor::interest() const {
  if (exec_.finished()) return {};
  std::vector<pollfd> wanted = box_.interest();
  for (const pollfd& p : exec_.interest()) wanted.push_back(p);
  return wanted;
}

void Supervisor::handle(int fd, short revents) {
  box_.handle(fd, revents);
  exec_.handle(fd, revents);
}

void Supervisor::run() {
  constexpr std::int64_t kMs = 1000000;
  while (!finished()) {
    std::vector<pollfd> wanted = interest();
    const std::int64_t deadline = next_deadline();
    const std::int64_t now = monotonic_ns();
    int timeout_ms = deadline == 0 ? -1 : static_cast<int>(std::max<std::int64_t>(0, (deadline - now + kMs - 1) / kMs));
    int ready = poll(wanted.data(), static_cast<nfds_t>(wanted.size()), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw_errno("supervise", "", "poll");
    }
    for (const pollfd& p : wanted) handle(p.fd, p.revents);
    tick(monotonic_ns());
  }
}

}  // namespace capsule::sandbox

// Supervisor: drives one one-shot box and its single exec as a unit: the poll interest of both, the box's
// events routed to the exec, and the end of both. Drive it with run() or from any event loop.
#pragma once

#include <poll.h>

#include <cstdint>
#include <vector>

#include "sandbox/sandbox.h"

namespace capsule::sandbox {

class Supervisor {
 public:
  Supervisor(Sandbox& box, Exec& exec) : box_(box), exec_(exec) {}

  // Descriptors to wait on, with the events wanted; empty once finished().
  std::vector<pollfd> interest() const;
  // CLOCK_MONOTONIC ns at which tick() must run next, or 0 when only descriptors matter.
  std::int64_t next_deadline() const { return exec_.next_deadline(); }
  void handle(int fd, short revents);
  void tick(std::int64_t now_ns) { exec_.tick(now_ns); }
  void cancel() { exec_.cancel(); }  // TERM, grace, KILL, ending as cancelled
  bool finished() const { return exec_.finished(); }

  // Blocking: polls until finished(). Throws SandboxError on poll failures.
  void run();

 private:
  Sandbox& box_;
  Exec& exec_;
};

}  // namespace capsule::sandbox

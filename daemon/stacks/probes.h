// Readiness probes that speak to a service over the stack's network: a TCP connect and an HTTP GET to
// 127.0.0.1:port, made by a thread that has joined the stack's network namespace (each stack's own thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace capsule::daemon {

struct ProbeOutcome {
  bool ready = false;
  bool refused = false;  // nothing listens on the port (ECONNREFUSED)
  std::string detail;    // what happened, for the record ("connection refused", "HTTP 503", ...)
};

// Connects to 127.0.0.1:port within `timeout`.
ProbeOutcome probe_tcp(std::uint16_t port, std::chrono::milliseconds timeout);
// GET path (Host: host) and reads the status line within `timeout`; ready when it is `status`. At most 4 KiB of
// the answer is read: a service cannot make the probe hold more.
ProbeOutcome probe_http(std::uint16_t port, const std::string& path, int status, const std::string& host,
                        std::chrono::milliseconds timeout);

}  // namespace capsule::daemon

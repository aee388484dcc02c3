// The HTTP server's limits and deadlines, shared by the listener, each connection and parse_request_bytes so a
// request is judged the same way with or without a socket.
#pragma once

#include <chrono>
#include <cstddef>

namespace capsule::http {

struct ServerOptions {
  std::size_t max_header_bytes = 16 * 1024;
  std::size_t max_body_bytes = 1024 * 1024;
  std::chrono::milliseconds header_timeout{10000};  // from the first byte (or accept) to the end of the header
  std::chrono::milliseconds body_timeout{30000};    // from the end of the header to the end of the body
  std::chrono::milliseconds idle_timeout{15000};    // between requests on a kept-alive connection
  std::chrono::milliseconds write_timeout{30000};   // for each write (a response, or one streamed chunk)
  // A refused connection's request is read and dropped this long after its 503, so the client reads the answer.
  std::chrono::milliseconds refusal_linger{1000};
  // Beyond it a new connection first closes the connection idle longest (waiting for its first request or, kept
  // alive, for its next); with none idle it gets 503 and is closed. Refused connections are not counted.
  std::size_t max_connections = 256;
  // Open connections of one non-root Unix-socket peer uid; beyond it the same, among that uid's own. 0: unlimited.
  std::size_t max_connections_per_uid = 64;
  std::size_t max_stream_buffer_bytes = 16 * 1024 * 1024;  // unsent streamed bytes before the client is dropped
};

}  // namespace capsule::http

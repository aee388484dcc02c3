// How a handler answers: a Responder (one answer, now or later, from any thread) and the StreamWriter it
// hands out for a chunked body, both safe to keep past the handler's return.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http/response.h"

namespace capsule::http {

namespace detail {
class Connection;
struct Exchange;
}  // namespace detail

// A chunked response body being sent (Transfer-Encoding: chunked). Thread-safe; usable from any thread for as
// long as it is kept. Dropping the last reference without finish() aborts the connection, so the client sees
// a truncated body instead of a clean end.
class StreamWriter {
 public:
  explicit StreamWriter(std::shared_ptr<detail::Connection> connection);
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Queues `chunk` (empty chunks are skipped). False once the client is gone, the connection was closed for
  // being too far behind (ServerOptions::max_stream_buffer_bytes), or finish() was called.
  bool write(std::string chunk);
  // Sends the terminating chunk once everything queued has been written. Idempotent.
  void finish();
  // Calls `callback` once, on the connection's strand, when every chunk queued so far has been sent (soon, if
  // none is queued): a producer writes its next piece then, holding at most one piece in the server. Dropped
  // without being called once the connection closes (releasing what it holds). One callback at a time.
  void when_drained(std::function<void()> callback);
  // True once the client disconnected or a write failed.
  bool client_gone() const;
  // Bytes queued and not yet written to the client (what counts against max_stream_buffer_bytes).
  std::size_t backlog() const;

 private:
  std::shared_ptr<detail::Connection> connection_;
  std::atomic<bool> finished_{false};
};

// The way a handler answers its request: exactly once, with respond() or start_stream(), now or later and from
// any thread. Copies share the same exchange; keep one to answer asynchronously. If every copy is dropped
// without an answer, the client gets 500 internal_error. Calls after the first answer are ignored (logged).
class Responder {
 public:
  explicit Responder(std::shared_ptr<detail::Exchange> exchange);

  void respond(Response response) const;
  std::shared_ptr<StreamWriter> start_stream(unsigned status, const std::string& content_type,
                                             std::vector<std::pair<std::string, std::string>> headers = {}) const;
  // True once the connection is closed (client gone or server stopped); answering then does nothing.
  bool client_gone() const;

 private:
  std::shared_ptr<detail::Exchange> exchange_;
};

}  // namespace capsule::http

// BlockingCalls: a small fixed pool of worker threads for the API's calls that wait (a session's create, delete,
// reset, checkpoint; file transfers), so the HTTP server's io threads never wait on them. Bounded, fair between
// callers (proxy/fair_queue.h), joined at stop.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "http/responder.h"
#include "http/response.h"
#include "proxy/fair_queue.h"

namespace capsule::daemon {

class BlockingCalls {
 public:
  // `what` names the calls in the 429 message ("file transfers"). At most `threads + max_waiting` tasks are
  // accepted and not yet finished at any time. One caller (uid) runs at most half the threads at once, its
  // tasks taking turns with other callers'; a caller other than root holds at most half the places.
  BlockingCalls(std::string what, std::size_t threads, std::size_t max_waiting);
  ~BlockingCalls();  // stop()
  BlockingCalls(const BlockingCalls&) = delete;
  BlockingCalls& operator=(const BlockingCalls&) = delete;

  // Hands `task` of caller `owner` to a worker. Throws http::ApiError 429 queue_full when the pool, or the
  // owner's share of it, holds as many tasks as it may; 503 draining after stop(). `task` must not throw
  // (answer_later below turns its errors into answers).
  void submit(uid_t owner, std::function<void()> task);
  // Accepts nothing more, lets the tasks already accepted run (a long one sees stopping() and gives up), and joins
  // the workers. Idempotent. Call it before what the tasks use is destroyed.
  void stop();
  // True once stop() was called; a task that may take long (a transfer) checks it between pieces of work.
  bool stopping() const;

 private:
  const std::string what_;
  const std::size_t capacity_;
  const std::size_t per_owner_;
  mutable std::mutex mutex_;
  std::size_t unfinished_ = 0;               // accepted, waiting or running
  std::map<uid_t, std::size_t> by_owner_;    // the same, per caller; the nodes' addresses key the queue
  bool stopping_ = false;
  proxy::FairQueue queue_;                   // last: joined first, while the counts above still exist
};

// Runs `work` on `calls` for the request's caller; `work` answers the responder it is given. What it throws is
// answered as the router answers a handler's exception (a stream already started is aborted instead: `work` must
// not throw after it started one). A full or stopped pool throws here, for the handler to answer.
void answer_later(BlockingCalls& calls, uid_t owner, const http::Responder& responder,
                  std::function<void(const http::Responder&)> work);

}  // namespace capsule::daemon

// BlockingCalls: a small fixed pool of worker threads for the API's calls that wait (a session's create, delete,
// reset, checkpoint; file transfers), so the HTTP server's io threads never wait on them. Bounded; joined at stop.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/responder.h"
#include "http/response.h"

namespace capsule::daemon {

class BlockingCalls {
 public:
  // `what` names the calls in the 429 message ("file transfers"). At most `threads + max_waiting` tasks are
  // accepted and not yet finished at any time.
  BlockingCalls(std::string what, std::size_t threads, std::size_t max_waiting);
  ~BlockingCalls();  // stop()
  BlockingCalls(const BlockingCalls&) = delete;
  BlockingCalls& operator=(const BlockingCalls&) = delete;

  // Hands `task` to a worker. Throws http::ApiError 429 queue_full when the pool holds as many tasks as it may,
  // 503 draining after stop(). `task` must not throw (answer_later below turns its errors into answers).
  void submit(std::function<void()> task);
  // Accepts nothing more, lets the tasks already accepted run (a long one sees stopping() and gives up), and joins
  // the workers. Idempotent. Call it before what the tasks use is destroyed.
  void stop();
  // True once stop() was called; a task that may take long (a transfer) checks it between pieces of work.
  bool stopping() const;

 private:
  void work();

  const std::string what_;
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::function<void()>> queue_;
  std::size_t unfinished_ = 0;  // accepted, waiting or running
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Runs `work` on `calls`; `work` answers the responder it is given. What it throws is answered as the router
// answers a handler's exception (a stream already started is aborted instead: `work` must not throw after it
// started one). A full or stopped pool throws here, for the handler to answer.
void answer_later(BlockingCalls& calls, const http::Responder& responder,
                  std::function<void(const http::Responder&)> work);

}  // namespace capsule::daemon

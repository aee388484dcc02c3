// BackpressuredSink: what a transfer worker writes into a streamed answer, waiting while the client is far
// behind, and giving up when the client goes or the daemon stops; shared by the file routes of sessions and runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/error.h"
#include "daemon/api/blocking_calls.h"
#include "http/responder.h"
#include "http/response.h"

namespace capsule::daemon {

inline constexpr std::size_t kStreamBacklogBytes = 1 << 20;  // a download waits for the client past this

// Between two pieces of a transfer: the daemon is stopping, so the transfer gives up (ApiContext::transfers).
inline void check_not_stopping(const BlockingCalls& transfers) {
  if (transfers.stopping()) throw http::ApiError("draining", "capsuled is shutting down");
}

// Writes chunks to a streamed answer, waiting while the client is more than kStreamBacklogBytes behind.
class BackpressuredSink {
 public:
  BackpressuredSink(std::shared_ptr<http::StreamWriter> writer, const BlockingCalls& transfers)
      : writer_(std::move(writer)), transfers_(transfers) {}

  void write(std::string_view chunk) {
    check_not_stopping(transfers_);
    if (!writer_->write(std::string(chunk))) throw base::Error("client_gone", "the client went away");
    if (writer_->backlog() <= kStreamBacklogBytes) return;
    std::unique_lock lock(state_->mutex);
    state_->drained = false;
    writer_->when_drained([state = state_] {
      std::lock_guard inner(state->mutex);
      state->drained = true;
      state->cv.notify_all();
    });
    // A closed connection drops the callback: the wait then ends on client_gone().
    while (!state_->drained) {
      state_->cv.wait_for(lock, std::chrono::milliseconds(200));
      if (writer_->client_gone()) throw base::Error("client_gone", "the client went away");
      check_not_stopping(transfers_);  // the server stopped: nobody drains what is queued any more
    }
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool drained = true;
  };
  std::shared_ptr<http::StreamWriter> writer_;
  const BlockingCalls& transfers_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace capsule::daemon

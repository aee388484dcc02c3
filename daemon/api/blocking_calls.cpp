// The API's worker pool for calls that wait (blocking_calls.h): a bounded queue in front of a fixed set of
// threads, and the helper that answers a request from one of them.
#include "daemon/api/blocking_calls.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/error.h"
#include "http/error_status.h"

namespace capsule::daemon {

BlockingCalls::BlockingCalls(std::string what, std::size_t threads, std::size_t max_waiting)
    : what_(std::move(what)),
      capacity_(threads + max_waiting),
      per_owner_(std::max<std::size_t>(1, (threads + max_waiting) / 2)),
      queue_(threads, std::max<std::size_t>(1, threads / 2)) {}

BlockingCalls::~BlockingCalls() { stop(); }

void BlockingCalls::submit(uid_t owner, std::function<void()> task) {
  // Posted under the lock: stop() then either sees it queued (and runs it) or this sees stopping_.
  std::lock_guard lock(mutex_);
  if (stopping_) throw http::ApiError("draining", "capsuled is shutting down");
  if (unfinished_ >= capacity_) {
    throw http::ApiError("queue_full", "more than " + std::to_string(capacity_) + " " + what_ +
                                           " are running or waiting; try again");
  }
  auto& held = by_owner_[owner];
  if (owner != 0 && held >= per_owner_) {
    throw http::ApiError("queue_full", "uid " + std::to_string(owner) + " has " + std::to_string(held) + " " +
                                           what_ + " running or waiting, the most one caller may; try again");
  }
  ++held;
  ++unfinished_;
  queue_.post(&held, [this, owner, task = std::move(task)]() mutable {
    task();
    task = nullptr;  // what it holds (a Responder) goes before the place is given back
    std::lock_guard finished(mutex_);
    --unfinished_;
    if (--by_owner_[owner] == 0) by_owner_.erase(owner);
  });
}

void BlockingCalls::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queue_.join();
}

bool BlockingCalls::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

void answer_later(BlockingCalls& calls, uid_t owner, const http::Responder& responder,
                  std::function<void(const http::Responder&)> work) {
  calls.submit(owner, [responder, work = std::move(work)] {
    try {
      work(responder);
    } catch (const std::exception& e) {
      const std::string code = http::error_code_of(e);
      if (http::status_for(code) >= 500) spdlog::error("http: a blocking call failed: {}", e.what());
      responder.respond(http::error_response(code, e.what()));
    } catch (...) {
      responder.respond(http::error_response("internal_error", "unknown error"));
    }
  });
}

}  // namespace capsule::daemon

// The API's worker pool for calls that wait (blocking_calls.h): a bounded queue in front of a fixed set of
// threads, and the helper that answers a request from one of them.
#include "daemon/api/blocking_calls.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "http/error_status.h"

namespace capsule::daemon {

BlockingCalls::BlockingCalls(std::string what, std::size_t threads, std::size_t max_waiting)
    : what_(std::move(what)), capacity_(threads + max_waiting) {
  try {
    for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    stop();  // the threads already started
    throw;
  }
}

BlockingCalls::~BlockingCalls() { stop(); }

void BlockingCalls::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw http::ApiError("draining", "capsuled is shutting down");
    if (unfinished_ >= capacity_) {
      throw http::ApiError("queue_full", "more than " + std::to_string(capacity_) + " " + what_ +
                                             " are running or waiting; try again");
    }
    ++unfinished_;
    queue_.push_back(std::move(task));
  }
  queued_.notify_one();
}

void BlockingCalls::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
}

bool BlockingCalls::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

void BlockingCalls::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every accepted task has been taken
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
    task = nullptr;  // what it holds (a Responder) goes before the place is given back
    std::lock_guard lock(mutex_);
    --unfinished_;
  }
}

void answer_later(BlockingCalls& calls, const http::Responder& responder,
                  std::function<void(const http::Responder&)> work) {
  calls.submit([responder, work = std::move(work)] {
    try {
      work(responder);
    } catch (const base::Error& e) {
      if (http::status_for(e.code()) >= 500) spdlog::error("http: a blocking call failed: {}", e.what());
      responder.respond(http::error_response(e.code(), e.what()));
    } catch (const std::exception& e) {
      spdlog::error("http: a blocking call failed: {}", e.what());
      responder.respond(http::error_response("internal_error", e.what()));
    } catch (...) {
      responder.respond(http::error_response("internal_error", "unknown error"));
    }
  });
}

}  // namespace capsule::daemon

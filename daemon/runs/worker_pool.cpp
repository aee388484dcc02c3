// WorkerPool: a mutex + condition variable queue in front of a few threads; stop() drains it first so no
// finished run is left unrecorded and no started one unsupervised at shutdown.
#include "daemon/runs/worker_pool.h"

#include <spdlog/spdlog.h>

#include <exception>

#include "base/thread_name.h"

namespace capsule::daemon {

WorkerPool::WorkerPool(const char* thread_name, std::size_t threads) {
  if (threads == 0) threads = 1;
  for (std::size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, thread_name] {
      base::name_this_thread(thread_name);
      work();
    });
  }
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::post(Job job) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      ready_.notify_one();
      return;
    }
  }
  job();
}

void WorkerPool::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  threads_.clear();
}

void WorkerPool::work() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left to run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job();
    } catch (const std::exception& e) {
      spdlog::error("worker: a job failed: {}", e.what());
    } catch (...) {
      spdlog::error("worker: a job failed with an unknown exception");
    }
  }
}

}  // namespace capsule::daemon

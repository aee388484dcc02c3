// WorkerPool: a few named threads fed by one queue. Runs use one to start boxes (so one run's slow start does
// not hold up the others' or the supervision loop) and one for the slow end of a run; sessions for theirs.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace capsule::daemon {

class WorkerPool {
 public:
  using Job = std::function<void()>;

  // `thread_name`: what `top -H` and perf show for its threads (at most 15 characters).
  WorkerPool(const char* thread_name, std::size_t threads);
  ~WorkerPool();  // runs every job still queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `job`; jobs are taken in submission order as threads free up. A job that throws is logged and
  // dropped: jobs are expected to record their own failures.
  void post(Job job);
  // Runs what is queued and stops the threads; later post()s run the job on the caller's thread.
  void stop();

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace capsule::daemon

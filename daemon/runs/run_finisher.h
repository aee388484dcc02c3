// A small pool of finisher threads fed by a queue: the slow end of a run (workspace diff, JUnit collection,
// record building, the ledger write, removing the run dir) runs here, never on the supervision loop.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace capsule::daemon {

class RunFinisher {
 public:
  using Job = std::function<void()>;

  explicit RunFinisher(std::size_t threads = 2);
  ~RunFinisher();  // runs every job still queued, then joins
  RunFinisher(const RunFinisher&) = delete;
  RunFinisher& operator=(const RunFinisher&) = delete;

  // Queues `job`; jobs run in submission order as threads free up. A job that throws is logged and dropped:
  // jobs are expected to record their own failures.
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

// BoxReaper: destroys boxes whose run has ended on a thread of its own, so a run's answer does not wait for
// the kill, the reap, the cgroup removal and the scratch removal (about 2 ms here, more on a busy disk).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "sandbox/sandbox.h"

namespace capsule::sandbox {

class BoxReaper {
 public:
  BoxReaper();
  ~BoxReaper();  // destroys what is still queued, then stops
  BoxReaper(const BoxReaper&) = delete;
  BoxReaper& operator=(const BoxReaper&) = delete;

  // Takes the box over; it is destroyed soon, in the order given. Null is ignored.
  void adopt(std::unique_ptr<Sandbox> box);
  // Returns once every box adopted before the call is gone (no process, cgroup or scratch entry left).
  void drain();
  std::size_t destroyed() const;

 private:
  void work();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::deque<std::unique_ptr<Sandbox>> queue_;
  std::size_t adopted_ = 0;
  std::size_t destroyed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace capsule::sandbox

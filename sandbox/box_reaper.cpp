// BoxReaper: one thread takes adopted boxes in order and destroys each (Sandbox::destroy never throws); drain()
// waits on a count, so callers that must see the host clean (shutdown, tests) can.
#include "sandbox/box_reaper.h"

#include "base/thread_name.h"

namespace capsule::sandbox {

BoxReaper::BoxReaper()
    : thread_([this] {
        base::name_this_thread("box-reaper");
        work();
      }) {}

BoxReaper::~BoxReaper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void BoxReaper::adopt(std::unique_ptr<Sandbox> box) {
  if (!box) return;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(box));
    ++adopted_;
  }
  wake_.notify_one();
}

void BoxReaper::drain() {
  std::unique_lock lock(mutex_);
  const std::size_t target = adopted_;
  done_.wait(lock, [&] { return destroyed_ >= target; });
}

std::size_t BoxReaper::destroyed() const {
  std::lock_guard lock(mutex_);
  return destroyed_;
}

void BoxReaper::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything adopted is gone
    std::unique_ptr<Sandbox> box = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    box->destroy();
    box.reset();
    lock.lock();
    ++destroyed_;
    done_.notify_all();
  }
}

}  // namespace capsule::sandbox

// FairQueue: workers pick clients in address order starting after the last one served (round-robin), skip
// clients at their cap, and drop a client's entry once it has nothing queued or running.
#include "proxy/fair_queue.h"

#include <algorithm>

#include "base/thread_name.h"

namespace capsule::proxy {

FairQueue::FairQueue(std::size_t workers, std::size_t per_client) : per_client_(std::max<std::size_t>(1, per_client)) {
  for (std::size_t i = 0; i < std::max<std::size_t>(1, workers); ++i) {
    threads_.emplace_back([this] {
      base::name_this_thread("proxy-fetch");
      work();
    });
  }
}

FairQueue::~FairQueue() { join(); }

void FairQueue::post(const void* client, Task task) {
  {
    std::lock_guard lock(mutex_);
    clients_[client].queued.push_back(std::move(task));
  }
  ready_.notify_one();
}

void FairQueue::join() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& thread : threads_) {
    if (!thread.joinable()) continue;
    // From a task that dropped the last owner: the worker finishes on its own once this returns.
    if (thread.get_id() == std::this_thread::get_id()) thread.detach();
    else thread.join();
  }
}

std::size_t FairQueue::pending(const void* client) const {
  std::lock_guard lock(mutex_);
  auto it = clients_.find(client);
  return it == clients_.end() ? 0 : it->second.queued.size() + it->second.running;
}

FairQueue::Clients::iterator FairQueue::next_client_locked() {
  auto eligible = [&](const auto& entry) { return !entry.second.queued.empty() && entry.second.running < per_client_; };
  const auto after = served_any_ ? clients_.upper_bound(last_served_) : clients_.begin();
  if (auto it = std::find_if(after, clients_.end(), eligible); it != clients_.end()) return it;
  if (auto it = std::find_if(clients_.begin(), after, eligible); it != after) return it;
  return clients_.end();
}

void FairQueue::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    Clients::iterator next = clients_.end();
    ready_.wait(lock, [&] {
      next = next_client_locked();
      return next != clients_.end() || (stopping_ && std::all_of(clients_.begin(), clients_.end(), [](const auto& entry) {
                                          return entry.second.queued.empty();
                                        }));
    });
    if (next == clients_.end()) return;  // stopping, nothing left to start
    const void* client = next->first;
    Client& state = next->second;
    Task task = std::move(state.queued.front());
    state.queued.pop_front();
    ++state.running;
    last_served_ = client;
    served_any_ = true;
    lock.unlock();
    try {
      task();
    } catch (...) {
      // Tasks answer their own errors; one that throws must not take a worker down.
    }
    task = nullptr;  // its captures go before the lock is taken again
    lock.lock();
    Client& done = clients_[client];
    --done.running;
    if (done.running == 0 && done.queued.empty()) clients_.erase(client);
    ready_.notify_all();  // a slot of this client is free: a worker may start its next task
  }
}

}  // namespace capsule::proxy

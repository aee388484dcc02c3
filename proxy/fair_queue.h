// FairQueue: the proxy's worker pool, with one queue per client (one sandbox's listener) served round-robin
// and a cap on how many workers one client may hold, so one sandbox's slow upstream cannot delay another's.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace capsule::proxy {

class FairQueue {
 public:
  using Task = std::function<void()>;
  // `workers` threads; one client runs at most `per_client` tasks at once (at least 1).
  FairQueue(std::size_t workers, std::size_t per_client);
  ~FairQueue();  // join(): queued tasks still run
  FairQueue(const FairQueue&) = delete;
  FairQueue& operator=(const FairQueue&) = delete;

  // Queues `task` for `client` (any stable key, e.g. the address of a listener's shared state).
  void post(const void* client, Task task);
  // Runs what is queued, then stops the workers. Idempotent.
  void join();

  // Tasks queued or running for `client` (for tests and stats).
  std::size_t pending(const void* client) const;

 private:
  struct Client {
    std::deque<Task> queued;
    std::size_t running = 0;
  };
  using Clients = std::map<const void*, Client>;
  void work();
  // The next client, after the last one served, with a queued task and a free slot; end() when none.
  Clients::iterator next_client_locked();

  const std::size_t per_client_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  Clients clients_;  // a null key is a client like any other
  const void* last_served_ = nullptr;
  bool served_any_ = false;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace capsule::proxy

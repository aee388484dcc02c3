// Singleflight: coalesces identical in-flight upstream fetches, so N sandboxes asking for the same page or file
// at once cause one upstream request; the others wait for it and share its value or its exception.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>

namespace capsule::proxy {

// Thread-safe. Value must be copyable: every waiter gets its own copy. A fetch must not call run() with its
// own key (it would wait for itself).
template <class Key, class Value>
class Singleflight {
 public:
  // Runs fetch() unless a fetch for `key` is already under way, in which case it waits for that one and returns
  // its value or rethrows its exception. Once a fetch has finished, the next call for the key fetches again.
  Value run(const Key& key, const std::function<Value()>& fetch) {
    std::unique_lock lock(mutex_);
    if (auto found = calls_.find(key); found != calls_.end()) {
      std::shared_ptr<Call> call = found->second;
      ++call->waiters;
      lock.unlock();
      return call->result.get();
    }
    auto call = std::make_shared<Call>();
    call->result = call->promise.get_future().share();
    calls_.emplace(key, call);
    lock.unlock();

    try {
      call->promise.set_value(fetch());
    } catch (...) {
      call->promise.set_exception(std::current_exception());
    }
    lock.lock();
    calls_.erase(key);
    lock.unlock();
    return call->result.get();
  }

  // Keys with a fetch under way.
  std::size_t in_flight() const {
    std::lock_guard lock(mutex_);
    return calls_.size();
  }

  // Callers that joined the fetch under way for `key` instead of fetching themselves (0 when none is).
  std::size_t waiters(const Key& key) const {
    std::lock_guard lock(mutex_);
    auto found = calls_.find(key);
    return found == calls_.end() ? 0 : found->second->waiters;
  }

 private:
  struct Call {
    std::promise<Value> promise;
    std::shared_future<Value> result;
    std::size_t waiters = 0;  // guarded by mutex_
  };

  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<Call>> calls_;
};

}  // namespace capsule::proxy

// LogWatchers: who wants to hear that a stored log grew, keyed by log file. Writers signal after each flushed
// append and at close; followers (GET .../logs?follow=true) read what is new instead of polling the file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace capsule::daemon {

class LogWatchers : public std::enable_shared_from_this<LogWatchers> {
 public:
  using Callback = std::function<void()>;

  // Unsubscribes when destroyed. A callback may still run once, concurrently, just after; callbacks hold
  // weak references to their owner.
  class Subscription {
   public:
    Subscription(std::weak_ptr<LogWatchers> watchers, std::uint64_t id) : watchers_(std::move(watchers)), id_(id) {}
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    std::weak_ptr<LogWatchers> watchers_;
    std::uint64_t id_;
  };

  // `callback` runs on the writer's thread after each signal for `key`: keep it short (post work elsewhere).
  std::unique_ptr<Subscription> subscribe(const std::string& key, Callback callback);
  void signal(const std::string& key);
  std::size_t size() const;

 private:
  void unsubscribe(std::uint64_t id);

  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  std::multimap<std::string, std::pair<std::uint64_t, Callback>> callbacks_;
};

}  // namespace capsule::daemon

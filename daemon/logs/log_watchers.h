// LogWatchers: who wants to hear that a stored log grew or that its run ended, keyed by log file. Writers
// signal after each flushed append and at close, the ledger's record of the run's end follows; followers
// (GET .../logs?follow=true) read what is new on each signal and end with the run, never polling the file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace capsule::daemon {

enum class LogEvent {
  kWritten,   // the log's file grew, or was closed
  kRunEnded,  // the run is recorded as finished: its log is whole and nothing follows
};

class LogWatchers : public std::enable_shared_from_this<LogWatchers> {
 public:
  using Callback = std::function<void(LogEvent)>;

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

  // `callback` runs on the signalling thread (the writer's, or the one recording the run's end) after each
  // signal for `key`: keep it short (post work elsewhere).
  std::unique_ptr<Subscription> subscribe(const std::string& key, Callback callback);
  void signal(const std::string& key, LogEvent event);
  std::size_t size() const;

 private:
  void unsubscribe(std::uint64_t id);

  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  std::multimap<std::string, std::pair<std::uint64_t, Callback>> callbacks_;
};

}  // namespace capsule::daemon

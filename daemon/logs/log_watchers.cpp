// LogWatchers: a mutex-guarded multimap of callbacks; signal() copies the matching ones and calls them outside
// the lock, so a callback may subscribe or unsubscribe without deadlocking.
#include "daemon/logs/log_watchers.h"

#include <vector>

namespace capsule::daemon {

LogWatchers::Subscription::~Subscription() {
  if (auto watchers = watchers_.lock()) watchers->unsubscribe(id_);
}

std::unique_ptr<LogWatchers::Subscription> LogWatchers::subscribe(const std::string& key, Callback callback) {
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  callbacks_.emplace(key, std::make_pair(id, std::move(callback)));
  return std::make_unique<Subscription>(weak_from_this(), id);
}

void LogWatchers::signal(const std::string& key, LogEvent event) {
  std::vector<Callback> due;
  {
    std::lock_guard lock(mutex_);
    const auto [first, last] = callbacks_.equal_range(key);
    for (auto it = first; it != last; ++it) due.push_back(it->second.second);
  }
  for (const auto& callback : due) callback(event);
}

std::size_t LogWatchers::size() const {
  std::lock_guard lock(mutex_);
  return callbacks_.size();
}

void LogWatchers::unsubscribe(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  for (auto it = callbacks_.begin(); it != callbacks_.end(); ++it) {
    if (it->second.first == id) {
      callbacks_.erase(it);
      return;
    }
  }
}

}  // namespace capsule::daemon

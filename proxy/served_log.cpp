// ServedLog: a mutex-guarded list, appended to from the proxy's worker threads.
#include "proxy/served_log.h"

#include <algorithm>
#include <utility>

namespace capsule::proxy {

void ServedLog::add(ServedObject object) {
  std::lock_guard lock(mutex_);
  objects_.push_back(std::move(object));
}

std::size_t ServedLog::size() const {
  std::lock_guard lock(mutex_);
  return objects_.size();
}

std::vector<ServedObject> ServedLog::objects() const {
  std::lock_guard lock(mutex_);
  return objects_;
}

nlohmann::json ServedLog::to_json(std::size_t from) const {
  std::vector<ServedObject> tail;
  {
    std::lock_guard lock(mutex_);
    if (from < objects_.size()) tail.assign(objects_.begin() + static_cast<std::ptrdiff_t>(from), objects_.end());
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& object : tail) {
    out.push_back({{"url", object.url}, {"sha256", object.sha256}, {"size", object.size}, {"source", object.source}});
  }
  return out;
}

void ServedLog::refuse(const std::string& url) {
  std::lock_guard lock(mutex_);
  if (refused_.size() >= kMaxRefused || std::find(refused_.begin(), refused_.end(), url) != refused_.end()) return;
  refused_.push_back(url);
}

nlohmann::json ServedLog::refused_json() const {
  std::lock_guard lock(mutex_);
  return refused_;
}

}  // namespace capsule::proxy

// Admission, lookup and ending of stacks; the records of ended ones are kept in memory and on disk. A stack's
// own thread does the work (stack_run.cpp); this file only hands it over and tells it when to end.
#include "daemon/stacks/stack_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "daemon/stacks/stack_run.h"
#include "http/response.h"
#include "sandbox/command.h"

namespace capsule::daemon {

using nlohmann::json;

StackManager::StackManager(SessionManager& sessions, StackManagerOptions options)
    : sessions_(sessions), options_(std::move(options)) {
  std::filesystem::create_directories(options_.stacks_dir);
  const std::size_t stale = sandbox::NetworkNamespace::remove_stale(options_.netns_dir);
  if (stale > 0) spdlog::info("removed {} stack network namespaces left by an earlier capsuled", stale);
  for (StackRecord& record : load_stack_records(options_.stacks_dir)) {
    if (!record.ended()) {
      record.state = "lost";
      record.ended_ms = unix_ms();
      record.ended_reason = "capsuled restarted while it was live";
      for (auto& [name, service] : record.services) {
        if (service.state != "failed" && service.state != "exited") service.state = "stopped";
        service.published.clear();
      }
      try {
        save_stack_record(options_.stacks_dir, record);
      } catch (const std::exception& e) {
        spdlog::warn("stack {}: recording it as lost failed: {}", record.id, e.what());
      }
      std::error_code ignored;
      std::filesystem::remove_all(options_.stacks_dir + "/" + record.id, ignored);
    }
    ended_[record.id] = std::move(record);
  }
  forget_oldest_locked();
}

void StackManager::forget_oldest_locked() {
  while (ended_.size() > options_.kept_records) {
    auto oldest = std::min_element(ended_.begin(), ended_.end(), [](const auto& a, const auto& b) {
      return a.second.created_ms != b.second.created_ms ? a.second.created_ms < b.second.created_ms : a.first < b.first;
    });
    if (live_.contains(oldest->first)) break;  // cannot happen: a live stack's record is not in ended_ yet
    std::error_code ignored;
    std::filesystem::remove(options_.stacks_dir + "/" + oldest->first + ".json", ignored);
    ended_.erase(oldest);
  }
}

StackManager::~StackManager() { stop(); }

void StackManager::stop() {
  std::vector<std::shared_ptr<Stack>> stacks;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& [id, stack] : live_) {
      if (stack->end_state.empty()) {
        stack->end_state = "lost";
        stack->end_reason = "capsuled stopped";
      }
      stacks.push_back(stack);
    }
  }
  changed_.notify_all();
  for (const auto& stack : stacks) {
    if (stack->thread.joinable()) stack->thread.join();
  }
  join_finished();
}

void StackManager::update(Stack& stack, const std::function<void(StackRecord&)>& change, bool persist) {
  StackRecord copy;
  {
    std::lock_guard lock(mutex_);
    change(stack.record);
    if (persist) copy = stack.record;
  }
  changed_.notify_all();
  if (!persist) return;
  try {
    save_stack_record(options_.stacks_dir, copy);
  } catch (const std::exception& e) {
    spdlog::error("stack {}: saving its record failed: {}", copy.id, e.what());
  }
}

json StackManager::create(const spec::StackSpec& spec, std::map<std::string, Submission> boxes, const Peer& peer) {
  auto stack = std::make_shared<Stack>();
  stack->id = sandbox::new_sandbox_id();
  stack->spec = spec;
  stack->boxes = std::move(boxes);
  stack->peer = peer;
  if (spec.ttl.count() > 0) stack->expires = std::chrono::steady_clock::now() + spec.ttl;
  StackRecord& record = stack->record;
  record.id = stack->id;
  record.created_ms = unix_ms();
  record.peer_uid = peer.uid;
  record.peer_pid = peer.pid;
  record.spec = spec::to_json(spec);
  for (const auto& [name, service] : spec.services) {
    record.hosts.push_back(name);
    record.services[name] = ServiceStatus{};
  }
  for (const spec::StageSpec& stage : spec.stages) {
    StageStatus status;
    status.name = stage.name;
    record.stages.push_back(std::move(status));
  }
  join_finished();
  std::lock_guard lock(mutex_);
  if (stopping_) throw http::ApiError("draining", "capsuled is shutting down and accepts no new stacks");
  if (live_.size() >= options_.max_stacks) {
    throw http::ApiError("too_many_stacks", std::to_string(live_.size()) + " stacks are live, the most capsuled runs at once; delete one first");
  }
  const std::size_t per_user = std::max<std::size_t>(1, options_.max_stacks / 4);
  const auto own = static_cast<std::size_t>(std::count_if(
      live_.begin(), live_.end(), [&](const auto& entry) { return entry.second->peer.uid == peer.uid; }));
  if (peer.uid != 0 && own >= per_user) {
    throw http::ApiError("too_many_stacks", "uid " + std::to_string(peer.uid) + " has " + std::to_string(own) +
                                                " live stacks, the most one user may hold; delete one first");
  }
  // All under the lock: the thread's first update waits for it, so `thread` is assigned before anyone looks.
  save_stack_record(options_.stacks_dir, record);
  live_[stack->id] = stack;
  try {
    stack->thread = std::thread([this, stack] {
      try {
        StackRun(*this, *stack).run();
      } catch (const std::exception& e) {  // StackRun records its own failures; this is the last guard
        spdlog::error("stack {}: {}", stack->id, e.what());
        std::lock_guard guard(mutex_);
        if (stack->end_state.empty()) {
          stack->end_state = "lost";
          stack->end_reason = std::string("capsuled failed to drive it: ") + e.what();
        }
      }
      end_thread(stack);
    });
  } catch (...) {
    live_.erase(stack->id);
    std::error_code ignored;
    std::filesystem::remove(options_.stacks_dir + "/" + stack->id + ".json", ignored);
    throw;
  }
  return stack->record.to_json();
}

void StackManager::end_thread(const std::shared_ptr<Stack>& stack) {
  StackRecord copy;
  {
    std::lock_guard lock(mutex_);
    stack->record.state = stack->end_state;
    stack->record.ended_reason = stack->end_reason;
    stack->record.ended_ms = unix_ms();
    copy = stack->record;
    ended_[stack->id] = copy;
    forget_oldest_locked();
    if (!stopping_) {
      // Its thread ends just after this; the next create() or stop() joins it.
      live_.erase(stack->id);
      finished_.push_back(stack);
    }
  }
  try {
    save_stack_record(options_.stacks_dir, copy);
  } catch (const std::exception& e) {
    spdlog::error("stack {}: saving its record failed: {}", copy.id, e.what());
  }
  changed_.notify_all();
}

void StackManager::join_finished() {
  std::vector<std::shared_ptr<Stack>> finished;
  {
    std::lock_guard lock(mutex_);
    finished.swap(finished_);
  }
  for (const auto& stack : finished) {
    if (stack->thread.joinable()) stack->thread.join();
  }
}

json StackManager::wait_started(const std::string& id, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto live = live_.find(id);
    if (live == live_.end()) break;
    if (live->second->record.state != "starting") return live->second->record.to_json();
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) return live->second->record.to_json();
  }
  if (auto ended = ended_.find(id); ended != ended_.end()) return ended->second.to_json();
  throw http::ApiError("not_found", "no stack with id " + id);
}

json StackManager::with_live_usage(json stack) const {
  for (auto& [name, service] : stack["services"].items()) {
    const std::string session = service.value("session", "");
    if (session.empty()) continue;
    if (const std::optional<json> live = sessions_.get(session); live && live->contains("usage")) {
      service["usage"] = (*live)["usage"];
    }
  }
  return stack;
}

std::optional<json> StackManager::get(const std::string& id) const {
  json live_stack;
  {
    std::lock_guard lock(mutex_);
    auto live = live_.find(id);
    if (live == live_.end() || !live->second->end_state.empty()) {
      if (auto ended = ended_.find(id); ended != ended_.end()) return ended->second.to_json();
      if (live == live_.end()) return std::nullopt;
      return live->second->record.to_json();  // ending: its sessions are going
    }
    live_stack = live->second->record.to_json();
  }
  return with_live_usage(std::move(live_stack));
}

std::optional<uid_t> StackManager::owner(const std::string& id) const {
  std::lock_guard lock(mutex_);
  if (auto live = live_.find(id); live != live_.end()) return live->second->peer.uid;
  if (auto ended = ended_.find(id); ended != ended_.end()) return ended->second.peer_uid;
  return std::nullopt;
}

std::vector<json> StackManager::list(std::optional<uid_t> uid, std::size_t limit) const {
  std::vector<const StackRecord*> records;
  std::lock_guard lock(mutex_);
  for (const auto& [id, stack] : live_) records.push_back(&stack->record);
  for (const auto& [id, record] : ended_) {
    if (!live_.contains(id)) records.push_back(&record);
  }
  std::erase_if(records, [&](const StackRecord* r) { return uid && r->peer_uid != *uid; });
  std::sort(records.begin(), records.end(), [](const StackRecord* a, const StackRecord* b) {
    return a->created_ms != b->created_ms ? a->created_ms > b->created_ms : a->id > b->id;
  });
  std::vector<json> page;
  for (std::size_t i = 0; i < records.size() && i < limit; ++i) page.push_back(records[i]->to_json());
  return page;
}

json StackManager::remove(const std::string& id) {
  std::shared_ptr<Stack> stack;
  {
    std::lock_guard lock(mutex_);
    auto live = live_.find(id);
    if (live == live_.end()) {
      if (ended_.contains(id)) throw http::ApiError("stack_ended", "stack " + id + " has ended");
      throw http::ApiError("not_found", "no stack with id " + id);
    }
    stack = live->second;
    if (!stack->end_state.empty()) throw http::ApiError("stack_ended", "stack " + id + " is ending");
    stack->end_state = "deleted";
    stack->end_reason = "deleted";
  }
  changed_.notify_all();
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, std::chrono::minutes(2), [&] { return live_.find(id) == live_.end() || stopping_; });
  if (auto ended = ended_.find(id); ended != ended_.end()) return ended->second.to_json();
  return stack->record.to_json();
}

}  // namespace capsule::daemon

// StackManager: live stacks (services on one private network, their stages) and the records of ended ones.
// Each live stack has a thread of its own (stack_run.cpp) that joins its network namespace and drives it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/auth.h"
#include "daemon/resolve.h"
#include "daemon/sessions/session_manager.h"
#include "daemon/stacks/port_relay.h"
#include "daemon/stacks/stack_record.h"
#include "sandbox/net_namespace.h"
#include "spec/stack_spec.h"

namespace capsule::daemon {

struct StackManagerOptions {
  std::string stacks_dir;     // records (<id>.json) and each live stack's hosts file (<id>/hosts)
  std::string netns_dir;      // each live stack's network namespace file
  std::size_t max_stacks = 16;  // live at once; more: 429 too_many_stacks
  std::size_t kept_records = 1000;  // ended stacks remembered (memory and files); the oldest go first
  PortRelayLimits relay{};          // each published port's
};

class StackManager {
 public:
  // Loads the records; stacks a dead daemon left live are recorded as lost and their namespaces removed (their
  // sessions were ended by SessionManager's own recovery).
  StackManager(SessionManager& sessions, StackManagerOptions options);
  ~StackManager();  // stop()
  StackManager(const StackManager&) = delete;
  StackManager& operator=(const StackManager&) = delete;
  // Ends every live stack (lost: "capsuled stopped") and joins their threads. Call before sessions.stop().
  void stop();

  // Accepts a stack and starts its thread; returns the stack object (state "starting"). `boxes`: each service's
  // submission (authorize_workspace applied as its caller). 429 too_many_stacks, 503 draining.
  nlohmann::json create(const spec::StackSpec& spec, std::map<std::string, Submission> boxes, const Peer& peer);
  // The stack object once it is no longer starting, or as it is when `timeout` passes.
  nlohmann::json wait_started(const std::string& id, std::chrono::milliseconds timeout);
  std::optional<nlohmann::json> get(const std::string& id) const;
  std::optional<uid_t> owner(const std::string& id) const;
  // Newest first, those of `uid` only unless nullopt.
  std::vector<nlohmann::json> list(std::optional<uid_t> uid, std::size_t limit) const;
  // Tears it down (deleted) and answers the final object. 404 unknown, 409 stack_ended.
  nlohmann::json remove(const std::string& id);

  struct Stack;

 private:
  friend class StackRun;
  // Applies `change` to the stack's record under the lock, saves it (unless `persist` is false) and wakes waiters.
  void update(Stack& stack, const std::function<void(StackRecord&)>& change, bool persist = true);
  void end_thread(const std::shared_ptr<Stack>& stack);
  // Joins the threads of stacks that have ended (never the caller's own).
  void join_finished();
  // A live stack's object with each service's usage read from its session now (outside the lock).
  nlohmann::json with_live_usage(nlohmann::json stack) const;
  // Drops the oldest ended records (and their files) past options_.kept_records. Under the lock.
  void forget_oldest_locked();

  SessionManager& sessions_;
  StackManagerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<Stack>> live_;  // by id, until its thread has torn it down
  std::map<std::string, StackRecord> ended_;            // records of stacks no longer live
  std::vector<std::shared_ptr<Stack>> finished_;        // ended, their threads not yet joined
  bool stopping_ = false;
};

// One live stack: what its thread works from and how it is told to end.
struct StackManager::Stack {
  std::string id;
  spec::StackSpec spec;
  std::map<std::string, Submission> boxes;
  Peer peer;
  StackRecord record;                    // guarded by the manager's mutex
  std::string end_state;                 // set to end it: deleted | expired | lost (guarded likewise)
  std::string end_reason;
  std::chrono::steady_clock::time_point expires = std::chrono::steady_clock::time_point::max();
  std::thread thread;

  // Asks for the end ("expired") once the TTL has passed and nothing else asked first. Under the manager's lock.
  void expire_if_due_locked() {
    if (end_state.empty() && std::chrono::steady_clock::now() >= expires) {
      end_state = "expired";
      end_reason = "its ttl passed";
    }
  }
};

}  // namespace capsule::daemon

// What the stack's thread keeps of each service while it runs (stack_run.cpp, stack_deploy.cpp): the watch on an
// exec's end and output lines, a log probe's compiled pattern, and the run object's fields it reads.
#pragma once

#include <regex.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/base64.h"
#include "daemon/stacks/stack_run.h"

namespace capsule::daemon {

inline constexpr std::size_t kMaxLine = 4096;               // longer lines are cut for the log probe
inline constexpr std::size_t kMaxQueuedBytes = 1 << 20;     // between two looks of the stack thread; older lines go
inline constexpr auto kTick = std::chrono::milliseconds(20);
// After an exec probe's timeout, how long its run may take to be seen ending before it is cancelled.
inline constexpr auto kProbeEndGrace = std::chrono::seconds(5);

inline std::int64_t ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

inline std::string status_of(const nlohmann::json& run) {
  if (run.contains("result") && run["result"].is_object() && run["result"].contains("status")) {
    return run["result"]["status"].get<std::string>();
  }
  return run.value("state", "");
}

inline std::optional<int> exit_code_of(const nlohmann::json& run) {
  if (run.contains("result") && run["result"].is_object() && run["result"].contains("exit_code") &&
      run["result"]["exit_code"].is_number_integer()) {
    return run["result"]["exit_code"].get<int>();
  }
  return std::nullopt;
}


// What the session manager tells of one exec, kept for the stack thread: its end, and (for a log probe) its
// output cut into lines. Filled from the manager's threads, so it only appends under its own lock.
struct CommandWatch {
  std::mutex mutex;
  std::condition_variable ended;
  std::string id;
  std::optional<nlohmann::json> finished;  // the run object
  bool keep_lines = false;
  std::string partial;
  std::deque<std::string> lines;
  std::size_t queued_bytes = 0;
  std::uint64_t dropped = 0;

  void take(const nlohmann::json& event) {
    const std::string kind = event.value("event", "");
    std::lock_guard lock(mutex);
    if (kind == "finished") {
      finished = event.value("run", nlohmann::json::object());
      if (!partial.empty()) push(std::move(partial));
      partial.clear();
      ended.notify_all();
    } else if (keep_lines && (kind == "stdout" || kind == "stderr")) {
      const std::optional<std::string> bytes = base::base64_decode(event.value("data_b64", ""));
      if (!bytes) return;
      for (char c : *bytes) {
        if (c == '\n') {
          push(std::move(partial));
          partial.clear();
        } else if (partial.size() < kMaxLine) {
          partial.push_back(c);
        }
      }
    }
  }
  void push(std::string line) {
    if (!keep_lines) return;
    while (!lines.empty() && queued_bytes + line.size() > kMaxQueuedBytes) {
      queued_bytes -= lines.front().size();
      lines.pop_front();
      ++dropped;
    }
    queued_bytes += line.size();
    lines.push_back(std::move(line));
  }
  // The log probe is done with it: nothing more is kept.
  void stop_keeping_lines() {
    std::lock_guard lock(mutex);
    keep_lines = false;
    lines.clear();
    partial.clear();
    queued_bytes = 0;
  }
};

// A log probe's pattern as POSIX extended regex (glibc's regexec, bounded time without back-references, which
// the spec refuses). Compiled once per service.
class LogPattern {
 public:
  explicit LogPattern(const std::string& pattern) {
    compiled_ = regcomp(&regex_, pattern.c_str(), REG_EXTENDED | REG_NOSUB) == 0;
  }
  ~LogPattern() {
    if (compiled_) regfree(&regex_);
  }
  LogPattern(const LogPattern&) = delete;
  LogPattern& operator=(const LogPattern&) = delete;
  bool found_in(const std::string& line) const { return compiled_ && regexec(&regex_, line.c_str(), 0, nullptr, 0) == 0; }

 private:
  regex_t regex_{};
  bool compiled_ = false;
};

struct StackRun::Service {
  std::string name;
  const spec::ServiceSpec* spec = nullptr;
  std::string session;
  std::shared_ptr<CommandWatch> command;
  Clock::time_point started{};
  Clock::time_point next_probe{};
  // An exec probe's attempt in flight (the stack's thread goes on probing the others meanwhile).
  std::shared_ptr<CommandWatch> probe_run;
  Clock::time_point probe_started{};
  std::uint32_t failed_in_row = 0;  // failed attempts after start_period, in a row (compose's retries)
  std::string state = "pending";
  std::unique_ptr<LogPattern> success, failure;
};

}  // namespace capsule::daemon

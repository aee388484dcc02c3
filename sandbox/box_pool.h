// BoxPool: boxes made ahead of demand for the environments runs and sessions asked for, each waiting (init ready,
// its first exec's child already in its cgroup) to be taken by exactly one of them; refilled by its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "sandbox/box_reaper.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"
#include "sandbox/start_gate.h"

namespace capsule::sandbox {

struct PoolOptions {
  std::size_t boxes_per_environment = 0;  // ready boxes kept for each wanted environment; 0: no pool
  std::size_t environments = 4;           // environments kept ready at once; the least recently asked goes first
  std::chrono::milliseconds idle_ttl{std::chrono::minutes(10)};  // one not asked for this long is let go
  // Asked before each box is made; false: none is made now (e.g. the state disk is below its watermark, where
  // new runs are refused too). Empty: always.
  std::function<bool()> may_fill{};
};

// Whether boxes of `spec` may be made before their run or session: nothing in it belongs to one run or is read
// at creation (no copy-on-write views or upper dir of its own, no writable binds, no listeners, no protected
// paths). Sessions' boxes and one-shot boxes are different environments (EnvironmentSpec::session).
bool poolable(const EnvironmentSpec& spec);

struct PoolStats {
  std::uint64_t hits = 0;     // takes answered with a ready box
  std::uint64_t misses = 0;   // takes of a poolable environment with none ready
  std::uint64_t made = 0;     // boxes made ready
  std::uint64_t failed = 0;   // boxes that could not be made or died waiting
  std::uint64_t expired = 0;  // boxes let go unused (environment idle or dropped, pool stopped)
  std::uint64_t stale = 0;    // boxes let go because a path they bind now names another directory
};

class BoxPool {
 public:
  using Create = std::function<std::unique_ptr<Sandbox>(const EnvironmentSpec&)>;
  // Unused boxes go to `reaper`, which must outlive the pool. Each box is made once `starts` holds no ticket
  // (or 50 ms have passed): on a machine of few CPUs a box made ahead would take one from a run waited for.
  BoxPool(Create create, BoxReaper& reaper, PoolOptions options, std::shared_ptr<StartGate> starts = {});
  ~BoxPool();  // stops making boxes; the waiting ones go to the reaper
  BoxPool(const BoxPool&) = delete;
  BoxPool& operator=(const BoxPool&) = delete;

  // A ready box of exactly `spec`, never used, its times().taken set; nullptr when none is waiting (the caller
  // makes one). Asking for a poolable environment makes it wanted: boxes of it are kept ready from then on.
  std::unique_ptr<Sandbox> take(const EnvironmentSpec& spec);
  std::size_t ready_count() const;
  // Whether a box of `spec` is waiting now: a hint for where to start a run (take() may still find none).
  bool has_ready(const EnvironmentSpec& spec) const;
  PoolStats stats() const;
  // Every waiting box, taken out (counted as expired) for the caller to destroy: what their disks were promised
  // is wanted for a box somebody waits for. The environments stay wanted; refills follow as room allows.
  std::vector<std::unique_ptr<Sandbox>> shed();

 private:
  // Device and inode of every rootfs layer and bind source, in order: a box binds what a path named when it was
  // made, so one made before the path was replaced (a workspace removed and cloned again) must not be used.
  using Sources = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  static Sources sources_of(const EnvironmentSpec& spec);
  struct Ready {
    std::unique_ptr<Sandbox> box;
    Sources sources;
  };
  struct Wanted {
    EnvironmentSpec environment;
    std::deque<Ready> ready;
    std::chrono::steady_clock::time_point asked;
    std::chrono::steady_clock::time_point retry_after;  // after a failure, not before
    std::chrono::milliseconds backoff{0};               // doubles with each failure in a row (a full disk)
  };
  void fill();
  // Makes one box of `environment` and drives it until init is ready and the first exec prepared.
  std::unique_ptr<Sandbox> make_ready(const EnvironmentSpec& environment);
  // Hands every box of `wanted` to the reaper, counting them as expired.
  void let_go_locked(Wanted& wanted);
  // Moves the boxes of environments not asked for within the TTL to the reaper; the next expiry time.
  std::chrono::steady_clock::time_point expire_locked(std::chrono::steady_clock::time_point now);

  const Create create_;
  BoxReaper& reaper_;
  const PoolOptions options_;
  const std::shared_ptr<StartGate> starts_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Wanted> wanted_;  // most recently asked first
  PoolStats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace capsule::sandbox

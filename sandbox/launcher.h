// Launcher: creates boxes from an EnvironmentSpec (create), and runs one-shot SandboxSpecs as
// create + exec + wait + destroy (run). Thread-safe and re-entrant: no process-global state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/box_pool.h"
#include "sandbox/cgroup.h"
#include "sandbox/error.h"
#include "sandbox/hooks.h"
#include "sandbox/result.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"
#include "sandbox/supervisor.h"
#include "base/unique_fd.h"

namespace capsule::sandbox {

struct LauncherOptions {
  std::string init_binary;                            // empty: capsule-init next to this executable
  std::string scratch_dir = "/var/lib/capsule/scratch";  // per-sandbox upper/work/mount points
  // Non-empty when scratch_dir is a tmpfs (cheap to create and remove dirs in): where what sandboxes write goes
  // instead, on a disk (their disk images, or upper/work without a disk limit).
  std::string data_dir;
  std::uint32_t host_id_base = 100000;                // sandbox id 0 maps to this host id
  std::uint32_t host_id_count = 65536;
  CgroupConfig cgroup;
  // Boxes made ahead for the environments runs and sessions ask for (take_or_create, start).
  PoolOptions pool;
  // Free space of the disk images' filesystem (data_dir, else scratch_dir) that no sandbox disk may be promised:
  // the disks of live boxes together never exceed the rest (DiskBudget). capsuled: its min_free_bytes.
  std::uint64_t disk_reserve_bytes = 0;
};

// When a disk must fit (Launcher::require_disk_room): beside the live boxes' disks, or on the free space alone.
enum class DiskRoom { kNow, kEver };

class StartedSandbox;

class Launcher {
 public:
  explicit Launcher(LauncherOptions options);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Never throws for problems of the spec or the host: those come back as setup_failed / internal_error.
  Result run(const SandboxSpec& spec, const RunHooks& hooks = {});

  // A live box: its init is running and has been sent the environment; it serves execs once ready().
  // Throws SandboxError when it cannot be made; with code "insufficient_storage" when its disk does not fit
  // beside the live boxes' disks (the pool's waiting boxes are let go first when that makes room).
  std::unique_ptr<Sandbox> create(const EnvironmentSpec& spec);

  // Throws the SandboxError "insufficient_storage" that create() would for a disk of `limits` (kNow, letting the
  // pool's boxes go when that makes room), or the one it would meet even with no other box alive (kEver).
  void require_disk_room(const Limits& limits, DiskRoom when);

  // A box of `spec` made ahead (LauncherOptions.pool: ready, never used, times().taken set) when one is waiting,
  // else create(spec). Throws SandboxError when it cannot be made.
  std::unique_ptr<Sandbox> take_or_create(const EnvironmentSpec& spec);

  // For event loops: creates the sandbox and returns it running, to be driven through its supervisor()
  // until finished, then finish()ed. Throws SandboxError when it cannot be started (a setup_failed Result
  // for it is setup_failure(error)).
  std::unique_ptr<StartedSandbox> start(const SandboxSpec& spec, const RunHooks& hooks = {});
  static Result setup_failure(const SandboxError& error, double wall_ms = 0);
  // Whether start(spec) would find a box made ahead waiting now, so that it costs an exec and no box: a hint
  // (another start may take that box first).
  bool has_ready_box(const SandboxSpec& spec) const;
  // A ticket of the start gate (start_gate.h) for work a caller waits for beyond start() and the exec, such as
  // a run's record and answer: the pool makes no box while it is held (50 ms at most each).
  StartGate::Ticket hold_starts();

  // Removes what a previous process using the same scratch dir and cgroup parent left behind (it crashed
  // or was killed): kills the processes in leftover cgroups, removes them and the scratch entries.
  // Returns how many sandboxes were cleaned up. Call before the first start().
  std::size_t remove_leftovers();
  // For a clean shutdown once every run has finished: lets the pool's boxes go, waits until every box handed
  // over for teardown is gone, and removes the (then empty) cgroup parent. start() makes every box anew after it.
  void remove_cgroup_parent();
  // Waits until every box whose teardown run() left to the reaper is gone.
  void drain_teardown();
  PoolStats pool_stats() const;

  int cgroup_version() const;
  const LauncherOptions& options() const;

 private:
  struct State;
  // create(), for the pool when `for_pool`: its boxes never take the last room (a box somebody waits for may need it).
  std::unique_ptr<Sandbox> create_box(const EnvironmentSpec& spec, bool for_pool);
  // The disk budget's claim for a box of `limits` (null without a disk limit); throws as create() does.
  std::unique_ptr<DiskClaim> claim_disk(const Limits& limits, bool for_pool);
  std::unique_ptr<State> state_;
};

// A one-shot box whose command is running (or has ended and awaits finish()). Destroying it without finish()
// kills everything in it and removes its cgroup and scratch directory.
class StartedSandbox {
 public:
  ~StartedSandbox();
  StartedSandbox(const StartedSandbox&) = delete;
  StartedSandbox& operator=(const StartedSandbox&) = delete;

  Supervisor& supervisor() { return *supervisor_; }
  // The spec's loopback_listeners, in order, as listening sockets inside the sandbox's network namespace.
  // Ownership passes to the caller (the first call; later calls return nothing).
  std::vector<base::UniqueFd> take_listeners() { return box_->take_listeners(); }
  // The box itself, e.g. to read its root filesystem's upper before this object goes.
  const Sandbox& box() const { return *box_; }
  // Reads usage and returns the Result. Call once, after supervisor().finished(). Every process of the exec
  // has ended by then; its cgroup, its pipes and the box are released when this object goes.
  Result finish();

 private:
  friend class Launcher;
  StartedSandbox() = default;
  // Destroyed bottom-up: the supervisor, the exec (its cgroup), then the box.
  std::unique_ptr<Sandbox> box_;
  std::unique_ptr<Exec> exec_;
  std::unique_ptr<Supervisor> supervisor_;
};

}  // namespace capsule::sandbox

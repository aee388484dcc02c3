// Spawner: sandbox children are cloned by a small single-threaded helper (capsule-init --spawner) instead of the
// daemon. A clone copies its caller's page tables and makes every page the caller writes afterwards fault (with a
// TLB flush across CPUs): ms of CPU per sandbox in a large multi-threaded daemon, microseconds in the helper.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <optional>

#include "sandbox/clone.h"

namespace capsule::sandbox {

class Spawner {
 public:
  // `init_exe_fd`: capsule-init, opened by the launcher (kept open by it for the Spawner's lifetime).
  explicit Spawner(int init_exe_fd);
  ~Spawner();  // the helper sees its channel close and exits; it is reaped here
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // What clone_sandbox_child does, done by the helper with CLONE_PARENT: the child is this process's child, its
  // exit signal 0, its pidfd ours. Thread-safe (one request at a time). A helper found dead is started again once.
  // Throws SandboxError (step "clone").
  ClonedChild spawn(const ChildFds& fds);

 private:
  void start_locked();
  void stop_locked();
  // std::nullopt: the helper was gone before it had the request. Throws SandboxError when its clone failed or
  // it went away after the request (the helper is then stopped; the next spawn starts a new one).
  std::optional<ClonedChild> request_locked(const ChildFds& fds);

  const int init_exe_fd_;
  std::mutex mutex_;
  pid_t helper_pid_ = -1;
  int helper_pidfd_ = -1;
  int channel_ = -1;
};

// The helper's side (capsule-init --spawner): serves requests on fd 3 until it closes. Never returns.
[[noreturn]] void serve_spawn_requests();

}  // namespace capsule::sandbox

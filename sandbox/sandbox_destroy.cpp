// Sandbox::destroy: the end of a box, whatever state it is in: thawed, every process killed, init reaped,
// its cgroup and scratch directory (and its disk) removed. Also what the destructor does.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/error.h"
#include "sandbox/sandbox.h"

namespace capsule::sandbox {

Sandbox::~Sandbox() { destroy(); }

void Sandbox::destroy() {
  if (destroyed_) return;
  destroyed_ = true;
  if (cgroup_ && frozen_) {
    try {
      cgroup_->freeze(false);  // frozen tasks keep a pending SIGKILL until thawed
    } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): the kill below retries
    }
  }
  if (pidfd_ >= 0) {
    if (init_alive_) {
      syscall(SYS_pidfd_send_signal, pidfd_, SIGKILL, nullptr, 0);  // the pid namespace dies with its init
      siginfo_t info;
      waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_), &info, WEXITED | __WALL);
      init_alive_ = false;
    }
    close(pidfd_);
    pidfd_ = -1;
  }
  if (control_ >= 0) {
    close(control_);
    control_ = -1;
  }
  lost_init();
  prepared_.reset();  // its leaf goes before the box's group
  if (cgroup_) {
    try {
      cgroup_->remove();
    } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): remove_leftovers() retries at next start
    }
  }
  listeners_.clear();
  scratch_.reset();
  disk_claim_.reset();  // the disk is detached: what it was promised is free to promise again
}

}  // namespace capsule::sandbox

// Restart recovery: what a capsuled that died (kill -9, a crash) left in its state dir, removed by the next one
// before it writes anything: sandbox processes and cgroups, the mounts and loop devices of runs', sessions' and
// stacks' boxes, their dirs and disk images, import staging. Idempotent; says what it removed.
#pragma once

#include <cstddef>
#include <string>

#include "sandbox/launcher.h"

namespace capsule::daemon {

struct RecoveryReport {
  std::size_t sandboxes = 0;     // boxes whose cgroups or dirs were left
  std::size_t mounts = 0;        // disks and binds of their layers detached
  std::size_t loop_devices = 0;  // devices still backed by an image in the state dir, told to detach
  std::size_t session_dirs = 0;  // dirs of sessions that ended with the daemon (the ledger marks them lost)
  std::size_t run_dirs = 0;
};

// The state dir's subdirectories whose mounts are the boxes' (scratch, disks, runs, sessions, stacks, netns),
// detached deepest first, then each loop device backed below the state dir told to detach, then
// launcher.remove_leftovers() (processes, cgroups, scratch and disk entries), then the run and session dirs and
// staging areas. Logs what it found.
RecoveryReport recover_state_dir(sandbox::Launcher& launcher, const std::string& state);

}  // namespace capsule::daemon

// The OOM killer's choice inside a box: any of its commands before its init. tmpfs pages (/tmp, /dev/shm) count
// against the box's memory but belong to no process, so a small command filling /tmp would lose the kernel's
// choice to init, which holds more, and the whole box would die (the run an internal_error, not oom_killed).
#pragma once

namespace capsule::sandbox {

// In a command's process (forked by init), before anything of the command runs: oom_score_adj to the maximum,
// 1000, so that the kernel's choice in the box's memory cgroup falls on a command whatever init holds (a score
// then exceeds the whole limit). Raising it needs no capability; lowering init's instead would take
// CAP_SYS_RESOURCE in the host's namespace, which capsuled may not have (and which would let every command it
// forks lower its own as far). A command may still lower its own back to what it inherited, or raise init's, at
// its own box's expense: the launcher reports the box's end as oom_killed then. 0, or the errno of the failed step.
int prefer_for_oom_kill();

}  // namespace capsule::sandbox

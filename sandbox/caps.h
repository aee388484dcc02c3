// Capability dropping with libcap: bounding, ambient, effective, permitted and inheritable sets.
// Called by capsule-init for itself and for the command, after every privileged step.
#pragma once

namespace capsule::sandbox {

// Clears the bounding and ambient sets (needs CAP_SETPCAP, so call while still privileged). Depends on no
// request: a standby child does it before its request comes. Throws SandboxError (step "caps").
void drop_capability_bounds();

// After drop_capability_bounds: switches to uid/gid (no supplementary groups) and clears the effective,
// permitted and inheritable sets. Throws SandboxError (step "caps").
void drop_privileges(unsigned uid, unsigned gid);

// capsule-init of a live sandbox after setup: keeps only what starting processes needs (CAP_SETUID, CAP_SETGID,
// CAP_SETPCAP to drop the bounding set, CAP_KILL, CAP_SYS_RESOURCE for rlimits) in every set. Throws SandboxError.
void keep_exec_capabilities();

// Sets no_new_privs and makes the process non-dumpable where asked. Throws SandboxError.
void set_no_new_privs();

}  // namespace capsule::sandbox

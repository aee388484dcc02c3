// Capability dropping with libcap: bounding, ambient, effective, permitted and inheritable sets.
// Called by capsule-init for itself and for the command, after every privileged step.
#pragma once

namespace capsule::sandbox {

// Clears the bounding and ambient sets (needs CAP_SETPCAP, so call while still privileged), then
// switches to uid/gid (no supplementary groups) and clears the remaining sets. Throws SandboxError (step "caps").
void drop_privileges(unsigned uid, unsigned gid);

// Sets no_new_privs and makes the process non-dumpable where asked. Throws SandboxError.
void set_no_new_privs();

}  // namespace capsule::sandbox

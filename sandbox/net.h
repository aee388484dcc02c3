// Network namespace set-up inside the sandbox: the new namespace has only a loopback device,
// which starts down; capsule-init brings it up so 127.0.0.1 works and nothing else exists.
#pragma once

namespace capsule::sandbox {

// Throws SandboxError (step "net").
void bring_up_loopback();

}  // namespace capsule::sandbox

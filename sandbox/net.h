// Network namespace set-up: the sandbox's new namespace has only a loopback device, which starts down;
// capsule-init brings it up so 127.0.0.1 works and nothing else exists. The launcher may also open listening
// sockets inside it for services the caller provides (the package proxy), before the command starts.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "base/unique_fd.h"

namespace capsule::sandbox {

// Throws SandboxError (step "net").
void bring_up_loopback();

// TCP sockets bound to 127.0.0.1:<port> and listening inside the network namespace of `pid`, one per port, in
// order. They belong to that namespace for their whole life, so only processes inside the sandbox can connect.
// Runs on a short-lived thread that joins the namespace (setns affects only the calling thread) and brings
// loopback up there, since an address on a down loopback cannot be bound. Throws SandboxError (step "net").
std::vector<base::UniqueFd> listen_in_network_namespace(pid_t pid, const std::vector<std::uint16_t>& ports);

}  // namespace capsule::sandbox

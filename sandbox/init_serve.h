// capsule-init's life after setup: it serves ExecRequests from the control channel, reaps every zombie,
// reports each exec's start and exit, and ends the box with a one-shot exec or when a session's launcher is gone.
#pragma once

#include <signal.h>

#include <cstdint>
#include <vector>

#include "sandbox/init_config.h"

namespace capsule::sandbox {

// Never returns. `handled` are the signals init blocked to receive synchronously.
[[noreturn]] void serve_execs(const InitConfig& config, const std::vector<std::uint8_t>& seccomp_program,
                              const sigset_t& handled);

}  // namespace capsule::sandbox

// capsule-init's side of the control channel (fd 3): its events to the launcher, one JSON object per message.
// Shared by the set-up (init_main.cpp) and the exec server (init_serve.cpp); a gone launcher is not an error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "sandbox/channel.h"
#include "sandbox/error.h"
#include "sandbox/init_config.h"

namespace capsule::sandbox {

inline constexpr int kInitControlFd = 3;

inline void send_init_event(const nlohmann::json& event) {
  try {
    send_message(kInitControlFd, event.dump());
  } catch (const SandboxError&) {
    // The launcher is gone; nothing left to tell.
  }
}

// `id` 0: the box itself (its set-up); otherwise the exec the failure is about.
inline void send_init_error(std::uint64_t id, const base::Cause& cause) {
  send_init_event({{"event", init_event::kError}, {"id", id}, {"step", cause.step}, {"path", cause.path},
                   {"errno", cause.errno_value}, {"detail", cause.detail}});
}

}  // namespace capsule::sandbox

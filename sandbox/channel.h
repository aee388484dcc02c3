// Control channel between the launcher and capsule-init: a SOCK_SEQPACKET pair carrying whole
// messages (JSON text) and file descriptors (SCM_RIGHTS, one per message).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capsule::sandbox {

// Returns {parent_end, child_end}, both close-on-exec. Throws SandboxError.
std::pair<int, int> make_channel();

// Sends one message; throws SandboxError (step "channel") on failure. `wait` false: never blocks (a peer that
// stopped reading fills the socket: EAGAIN is then a failure too).
void send_message(int fd, std::string_view message, bool wait = true);
// Receives one message; std::nullopt on orderly EOF. Throws SandboxError on error or truncation.
std::optional<std::string> receive_message(int fd);

void send_fd(int fd, int fd_to_send, bool wait = true);
int receive_fd(int fd);  // the received descriptor is close-on-exec

// Largest message either side sends.
inline constexpr std::size_t kMaxMessageBytes = 1 << 20;

}  // namespace capsule::sandbox

// `capsule session exec -t`: an exec on a pty in the session, driven from this terminal: raw mode here, our
// keystrokes fed to its stdin (Ctrl-C included), our window size sent on SIGWINCH, its output relayed.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "http/unix_client.h"

namespace capsule::client {

// Runs the exec `body` (an ExecSpec without stdin) with "pty": true and this terminal's size in session
// `session_id`, until it ends; returns run_view's exit status. Throws std::runtime_error when stdin is not a
// terminal, and what the client throws for daemon errors.
int exec_on_tty(const http::HttpClient& client, const std::string& session_id, nlohmann::json body, bool json_output);

}  // namespace capsule::client

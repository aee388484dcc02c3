// Finding and reaching this user's capsuled: default socket and state paths, auto-starting capsuled when nobody
// listens, and the `capsule version` and `capsule daemon` subcommands.
#pragma once

#include <string>

#include "http/unix_client.h"

namespace capsule::client {

const char* client_version();

// Where this user's daemon lives: /run/capsule/capsule.sock and /var/lib/capsule for root, else under
// $XDG_RUNTIME_DIR and $XDG_STATE_HOME (~/.local/state). $CAPSULE_SOCKET (via --socket's envname) and
// $CAPSULE_STATE_DIR override them.
std::string default_socket_path();
std::string default_state_dir();
// capsuled where the install layout puts it relative to the running capsule binary (install_layout.h).
std::string capsuled_path();

// Returns once capsuled answers on the client's socket: at once when it already listens, else after starting
// capsuled detached (own session, output to capsuled.log in its state dir). Throws when it cannot.
void ensure_daemon(const http::HttpClient& client);

// "capsule VERSION" and the daemon's version, API, kernel, cgroup and features.
int cmd_version(const std::string& socket);
// Replaces this process with capsuled in the foreground; returns only by throwing.
int cmd_daemon(const std::string& socket, const std::string& state_dir);

}  // namespace capsule::client

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
// capsuled's path relative to this executable's directory (install_layout.h): capsule is in bin/, capsule-full in
// libexec/capsule/; each executable's side of full_commands.h defines it.
extern const char* const kCapsuledFromThisCli;
// capsuled where the install layout puts it relative to the running executable.
std::string capsuled_path();

// The state dir of a capsuled that `capsule` may start for `socket`: default_state_dir() for the default socket or
// when $CAPSULE_STATE_DIR names one (the pair the user chose); else empty, since the state dir of a daemon for any
// other socket is not known (capsuled keeps socket and state apart) and the default one may be another daemon's.
std::string state_dir_for(const std::string& socket);
// Why no state dir belongs to `socket` (state_dir_for() is empty) and how to start a daemon for it.
std::string unknown_state_dir_message(const std::string& socket);

// Returns once capsuled listens on the client's socket: at once when it already does, else after starting
// capsuled detached (own session, output to capsuled.log in its state dir, state_dir_for() the socket). Throws,
// touching nothing, when no state dir belongs to the socket or the daemon cannot be started.
void ensure_daemon(const http::HttpClient& client);

// `call()` (one request through `client`), with capsuled started first when its connect finds nobody listening:
// the same as ensure_daemon() then call(), without a connect of its own in front of every request. A failed
// connect has sent nothing, so the request goes again exactly once.
template <typename Call>
auto with_daemon(const http::HttpClient& client, const Call& call) {
  try {
    return call();
  } catch (const http::ConnectError& e) {
    if (!e.nobody_listening()) throw;
  }
  ensure_daemon(client);
  return call();
}

// "capsule VERSION" and the daemon's version, API, kernel, cgroup and features.
int cmd_version(const std::string& socket);
// Replaces this process with capsuled in the foreground; returns only by throwing.
int cmd_daemon(const std::string& socket, const std::string& state_dir);

}  // namespace capsule::client

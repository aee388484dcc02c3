// persist_shell_state without a tty: a script exec runs inside a small wrapper that restores the cwd and the
// exported variables the previous script exec left, and saves them again when the script's shell exits.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace capsule::daemon {

// Where inside the box the state is kept (the session's own /tmp, gone with the box).
inline constexpr const char* kShellStateDir = "/tmp/.capsule-shell-state";

// The argv of a script exec with persisted shell state: /bin/sh -c WRAPPER sh SCRIPT SETUP, where SETUP
// re-applies what the exec itself asks for (its env, its cwd) after the saved state, so the request wins.
std::vector<std::string> shell_state_command(const std::string& script, const std::map<std::string, std::string>& env,
                                             const std::optional<std::string>& cwd);

// `text` as one single-quoted shell word.
std::string shell_quote(const std::string& text);

}  // namespace capsule::daemon

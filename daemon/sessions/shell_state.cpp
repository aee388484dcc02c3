// The wrapper behind persist_shell_state: saved state sourced first, the exec's own env and cwd next, the
// script evaluated, and on the shell's EXIT (also `exit N`) `export -p` and `pwd` saved for the next exec.
#include "daemon/sessions/shell_state.h"

namespace capsule::daemon {

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') quoted += "'\\''";
    else quoted += c;
  }
  return quoted + "'";
}

std::vector<std::string> shell_state_command(const std::string& script, const std::map<std::string, std::string>& env,
                                             const std::optional<std::string>& cwd) {
  const std::string dir = shell_quote(kShellStateDir);
  const std::string wrapper =
      "__capsule_state=" + dir + "\n"
      "__capsule_script=$1\n"
      "__capsule_setup=$2\n"
      "set --\n"
      "if [ -r \"$__capsule_state/env\" ]; then . \"$__capsule_state/env\"; fi\n"
      "if [ -r \"$__capsule_state/cwd\" ]; then cd \"$(cat \"$__capsule_state/cwd\")\" 2>/dev/null || :; fi\n"
      "eval \"$__capsule_setup\"\n"
      "trap '__capsule_status=$?; mkdir -p \"$__capsule_state\" && export -p > \"$__capsule_state/env\" &&"
      " pwd > \"$__capsule_state/cwd\"; exit $__capsule_status' EXIT\n"
      "eval \"$__capsule_script\"\n";
  std::string setup;
  for (const auto& [key, value] : env) setup += "export " + key + "=" + shell_quote(value) + "\n";
  if (cwd) setup += "cd " + shell_quote(*cwd) + "\n";
  return {"/bin/sh", "-c", wrapper, "sh", script, setup};
}

}  // namespace capsule::daemon

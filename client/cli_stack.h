// `capsule stack up|ps|logs|exec|down`: stacks of services on one private network (docs/stacks.md) from a JSON body
// or a compose.yaml subset, shown as a summary and tables; logs and exec reuse the runs and session commands.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/cli_session.h"

namespace capsule::client {

// The stack subcommands as parsed: which one ran (its App is parsed()) and what it was given.
struct StackCommands {
  CLI::App* group = nullptr;
  CLI::App *up = nullptr, *ps = nullptr, *logs = nullptr, *exec = nullptr, *down = nullptr;
  std::string file;                 // up: the JSON body or compose.yaml
  std::string id, service;
  bool detach = false, json = false;
  bool stderr_stream = false, stdout_stream = false, follow = false;  // logs (neither: both streams)
  std::optional<int> tail;                     // logs
  ExecOptions exec_options;  // exec: its flags; id becomes the service's session
};

// Adds `stack` and its subcommands to `app`, bound to `commands` (which must outlive the parse).
void add_stack_commands(CLI::App& app, StackCommands& commands);

// /v1/stacks/{id}, the id URL-encoded.
std::string stack_path(const std::string& id);
// `stack up`'s exit status for a stack object: 0 up (or starting, with --detach), 1 failed, 125 any other state.
int stack_exit_code(const nlohmann::json& stack);
// "stack ID STATE", the stages (name, state, wall, exit, test counts), the services (state, ready after, exit,
// session) and the failure {reason, stage, service, message} when there is one; without stages for `stack ps ID`.
std::string format_stack_summary(const nlohmann::json& stack, bool with_stages = true);
// The `stack ps` table (ID, STATE, SERVICES, FAILURE, CREATED); ages are relative to now_ms.
std::string format_stacks_table(const nlohmann::json& stacks, std::int64_t now_ms);

// Runs the parsed stack subcommand other than `up`. `command_words` is what followed the first "--" (only `exec`
// takes it). Returns `exec`'s status (run_view's rule), 2 for a service the stack does not have, else 0; errors
// print "capsule: <code>: <message>" (or "capsule: <what>") and return 125.
int cmd_stack(const std::string& socket, StackCommands& commands, bool separator_given,
              const std::vector<std::string>& command_words);
// `stack up` (cli_stack_up.cpp, in capsule-full: it reads compose.yaml with yaml-cpp): returns stack_exit_code
// of the stack object, or 125 as cmd_stack does.
int cmd_stack_up(const std::string& socket, const StackCommands& commands);

}  // namespace capsule::client

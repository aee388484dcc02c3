// SessionSpec (POST /v1/sessions) and ExecSpec (POST /v1/sessions/{id}/exec): parsed, validated and printed
// from one place; the environment half of a session reuses RunSpec's parser, so both speak one vocabulary.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/limits.h"
#include "spec/run_spec.h"

namespace capsule::spec {

enum class OnExpiry { kDestroy, kFreeze };

struct SessionSpec {
  // image / toolchains / layers, as_of, workspace, limits, network, policy, env, cwd, labels. Its argv is a
  // placeholder (sessions run nothing of their own) and it has no stdin or collect.
  RunSpec environment;
  std::vector<std::string> protect;       // globs, relative to the workspace (absolute: from the root)
  std::chrono::milliseconds ttl{0};       // from creation; 0: none
  std::chrono::milliseconds idle_ttl{0};  // since the last exec ended; 0: none
  OnExpiry on_expiry = OnExpiry::kDestroy;
  // Script execs keep the shell's cwd and exported variables from one to the next (daemon/sessions/shell_state.h).
  bool persist_shell_state = false;
};

// Throws http::ApiError("invalid_spec", "<field>: <problem>"), unknown fields included.
SessionSpec parse_session_spec(const nlohmann::json& body, const LimitPolicy& policy);
// parse_session_spec(to_json(spec), policy) == spec under the same policy.
nlohmann::json to_json(const SessionSpec& spec);

// A script exec is `/bin/sh -c SCRIPT`: one argument, which the kernel bounds (MAX_ARG_STRLEN).
constexpr std::size_t kMaxScriptBytes = 128 * 1024 - 1;

struct ExecSpec {
  std::vector<std::string> argv;      // or
  std::optional<std::string> script;  // text run by /bin/sh
  std::optional<std::string> cwd;     // absent: the session's
  std::map<std::string, std::string> env;  // added to the session's
  std::optional<std::string> user;         // who it runs as (json_fields.h); absent: the session's image user
  std::optional<std::string> stdin_data;   // absent: stdin is at EOF
  std::chrono::milliseconds timeout{0};       // wall; 0: the session's limits.wall_time
  std::chrono::milliseconds idle_timeout{0};  // 0: none
  std::chrono::milliseconds cpu_time{0};      // 0: the session's
  std::chrono::milliseconds kill_grace{0};    // 0: the session's
  std::uint64_t output_cap = 0;               // 0: the session's
  bool background = false;
  // Stdin stays open for POST .../execs/{exec_id}/stdin after `stdin` (until a write with close).
  bool stdin_open = false;
  // A terminal (the box's own devpts): stdin, stdout and stderr are one pty of rows x cols; output comes as
  // stdout; Ctrl-C written to stdin interrupts the foreground job; stdin stays open.
  bool pty = false;
  std::uint16_t rows = 24;
  std::uint16_t cols = 80;
  std::map<std::string, std::string> labels;
  // collect, as a run's (RunSpec's fields of the same names; parsed and printed by run_spec's code): what the
  // exec's record reads from the session's workspace when it ends. No "outputs": a session's files stay in its box.
  std::vector<std::string> junit_globs;
  std::vector<std::string> classfile_globs;
  std::vector<std::string> coverage_globs;
  std::size_t tail_lines = sandbox::kDefaultTailLines;
  // baseline, as a run's (needs collect.junit): the exec's test cases against a finished run's (record.baseline).
  std::optional<Baseline> baseline;

  // Whether the record reads anything of the workspace (a glob of collect).
  bool collects() const { return !junit_globs.empty() || !classfile_globs.empty() || !coverage_globs.empty(); }
  // What runs: argv, or the script through /bin/sh -c.
  std::vector<std::string> command() const;
};

// Throws http::ApiError("invalid_spec", ...). stdin is "stdin" (text) or "stdin_b64" (bytes).
ExecSpec parse_exec_spec(const nlohmann::json& body);
// POST /v1/sessions/{id}/network: {"mode": "none" | "proxy"}; true for "proxy" (on). Throws invalid_spec.
bool parse_network_switch(const nlohmann::json& body);

// The exec's collect fields and baseline put into `run` (the RunSpec its record is built from: daemon/record/run_record.h).
void apply_collect(const ExecSpec& spec, RunSpec& run);
// Every field; stdin as stdin_b64. parse_exec_spec(to_json(spec)) == spec.
nlohmann::json to_json(const ExecSpec& spec);

}  // namespace capsule::spec

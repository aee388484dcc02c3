// `capsule session create|ls|show|exec|attach|execs|kill|cp|diff|reset|checkpoint|commit|network|rm`: their flags, the SessionSpec
// and ExecSpec bodies they build, and the requests to capsuled's /v1/sessions routes (docs/api.md "Sessions").
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "client/cli_args.h"
#include "client/session_attach.h"

namespace capsule::client {

// `session create`: the run flags that describe an environment, plus the session's own.
struct SessionCreateOptions {
  RunOptions run;  // image, toolchains, as_of, workspace + mode, workdir, limits, env, labels, network, policy
  std::vector<std::string> layers;       // image refs stacked on the base
  std::string disk;                      // limits.disk
  std::vector<std::string> protect;      // globs, read-only for every exec
  std::string ttl, idle_ttl, on_expiry;  // durations as typed; destroy | freeze
  bool persist_shell_state = false;
  bool quiet = false;  // print only the id
  bool json = false;   // print the session object
};

// `session exec ID [flags] -- CMD...`
struct ExecOptions {
  std::string id;
  std::vector<std::string> argv;            // the command (after --), or empty with a script
  std::string script_file;                  // --script FILE: its text is the script
  std::string script;                       // -c SCRIPT
  std::string cwd, timeout, idle_timeout;   // as typed
  std::string kill_grace;                   // as typed
  std::vector<std::string> env;             // K=V, or K to copy K from here
  std::vector<std::string> labels;          // K=V
  std::string stdin_file;                   // --stdin-file F
  std::optional<std::string> stdin_data;    // filled from our stdin by -i
  bool interactive = false;                 // -i (with -t: stdin forwarded as typed)
  bool tty = false;                         // -t: a pty in the session, driven from our terminal
  bool background = false;
  bool json = false;                        // print the finished run object instead of the output
  RunOptions collect;                       // --junit, --collect-classfiles, --collect-coverage, --tail-lines,
                                            // --baseline, --allow-removed
};

// The session subcommands as parsed: which one ran (its App is parsed()) and what it was given.
struct SessionCommands {
  CLI::App* session = nullptr;
  CLI::App* create = nullptr;
  CLI::App* ls = nullptr;
  CLI::App* show = nullptr;
  CLI::App* exec = nullptr;
  CLI::App* attach = nullptr;
  CLI::App* execs = nullptr;
  CLI::App* kill = nullptr;
  CLI::App* cp = nullptr;
  CLI::App* diff = nullptr;
  CLI::App* reset = nullptr;
  CLI::App* checkpoint = nullptr;
  CLI::App* commit = nullptr;
  CLI::App* rm = nullptr;
  CLI::App* network = nullptr;
  SessionCreateOptions create_options;
  ExecOptions exec_options;
  std::string id, name /* checkpoint name, commit ref */, to, state, label, source, destination, after;
  int limit = 0;  // session ls: page size (0: the daemon's default)
  std::string exec_id;
  std::string signal = "TERM";  // kill --signal
  AttachOffsets attach_from;
  std::vector<std::string> ids;
  bool json = false;
  bool patch = false;
  std::vector<std::string> diff_include, diff_exclude;  // session diff --include / --exclude globs
  std::string network_mode;                             // session network ID none|proxy
};

// Adds `session` and its subcommands to `app`, bound to `commands` (which must outlive the parse).
void add_session_commands(CLI::App& app, SessionCommands& commands);

// The flags of `session exec` after its ID (and `stack exec`'s after ID SERVICE), bound to `options`: what follows
// them (or "--") is the command.
void add_exec_flags(CLI::App& exec, ExecOptions& options);

// The POST /v1/sessions body: only fields that were given, values passed through as typed. Throws
// std::invalid_argument for malformed K=V items, --mode without --workspace, a bad --on-expiry.
nlohmann::json build_session_body(const SessionCreateOptions& options);
// The POST .../exec body: argv, or the script (-c, or read from --script FILE), the stdin bytes (from -i or
// read from --stdin-file) as stdin_b64. Throws std::invalid_argument when both or neither of a command and a
// script are given, for -i with --stdin-file, and std::runtime_error for an unreadable file.
nlohmann::json build_exec_body(const ExecOptions& options);

// GET .../diff's target: ?patch=1 and each --include and --exclude glob as its own query parameter.
std::string session_diff_target(const std::string& id, bool patch, const std::vector<std::string>& include,
                                const std::vector<std::string>& exclude);

// `session diff`: "A path", "M path", "D path" lines (binary files marked, a note when the list is truncated),
// then with `patch` each file's unified diff from "patches" (or why it has none).
std::string format_session_diff(const nlohmann::json& diff, bool patch);

// /v1/sessions/{id}, the id URL-encoded.
std::string session_path(const std::string& id);
// /v1/sessions/{id}/execs/{exec_id}, both URL-encoded.
std::string exec_path(const std::string& session_id, const std::string& exec_id);

// The "signal" of POST .../signal for `session kill --signal`: a number as a number, a name without its "SIG"
// prefix in upper case (the daemon knows TERM, INT, KILL, HUP, QUIT, USR1, USR2 and answers for the rest).
nlohmann::json signal_value(const std::string& typed);

// `session exec`: runs options.argv (or the script) in session options.id, relaying its output (or a terminal with
// -t); returns run_view's exit status. Throws (ResponseError, ConnectError, invalid_argument) on failure.
int cmd_session_exec(const std::string& socket, ExecOptions options);

// The error rule of the session and stack commands: runs `command` and returns its status; when it throws, prints
// "capsule: <code>: <message>" (the daemon's error) or "capsule: <what>" and returns 125.
int exit_125_on_error(const std::function<int()>& command);

// Runs the parsed session subcommand. `command_words` is what followed the first "--" (only `exec` takes it).
// Returns the exit status: exec's and attach's follow run_view's rule; errors print "capsule: <code>: <message>" (or
// "capsule: <what>") and return 125.
int cmd_session(const std::string& socket, SessionCommands& commands, bool separator_given,
                const std::vector<std::string>& command_words);

}  // namespace capsule::client

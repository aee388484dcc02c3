// The `capsule` subcommands: `run` (RunSpec body from flags, live event stream, docker-like exit codes, daemon
// auto-start), `runs ls|show|logs|cancel`, `version` and `daemon`, plus the pure helpers the tests check.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace capsule::client {

const char* client_version();

// Exit status documentation shared by `capsule --help` and `capsule run --help`.
extern const char* const kExitCodeHelp;
// Exit status of `capsule run` when capsule itself, the daemon or the request fails (and for usage errors).
inline constexpr int kRunErrorExit = 125;

// `capsule run` flags as typed. Sizes and durations stay strings: the daemon is the one place parsing them.
struct RunOptions {
  std::string image;                    // empty: the daemon's default image
  std::vector<std::string> argv;        // the command (after --)
  std::vector<std::string> env;         // K=V, or K to copy K from this process's environment
  std::vector<std::string> labels;      // K=V
  std::vector<std::string> junit;       // JUnit XML globs inside the workspace
  std::vector<std::string> toolchains;  // NAME=VERSION (or python=auto), instead of an image
  std::string as_of;                    // YYYY-MM-DD for "auto" toolchains
  std::string workdir;                  // cwd inside the sandbox
  std::string workspace;                // host directory; relative paths are made absolute
  std::string mode;                     // cow | ro | rw
  std::string timeout;                  // limits.wall_time
  std::string cpu_time;                 // limits.cpu_time
  std::string memory;                   // limits.memory
  std::optional<double> cpus;           // limits.cpus
  std::optional<std::int64_t> pids;     // limits.pids
  std::string network;
  std::string policy;
  std::optional<std::string> stdin_data;  // filled from our stdin by --interactive
  bool interactive = false;
  bool json = false;
  bool detach = false;
};

// Registers the `run` flags on `command`, bound to `options`.
void add_run_flags(CLI::App& command, RunOptions& options);

// The POST /v1/runs body for these flags: only fields that were given, values passed through as typed.
// Throws std::invalid_argument for malformed K=V items or --mode without --workspace.
nlohmann::json build_run_body(const RunOptions& options);

// `capsule run`'s exit status for a finished run object (see kExitCodeHelp).
int exit_code_for(const nlohmann::json& run);
// "capsule: run ID STATE in 1.23 s (exit 0)", with the reason for abnormal ends and JUnit counts when present.
std::string summary_line(const nlohmann::json& run);
// Rows (the first is the header) as columns 3 spaces apart, left-aligned, without trailing blanks.
std::string format_columns(const std::vector<std::vector<std::string>>& rows);
// The `runs ls` table (ID, STATE, EXIT, WALL, CREATED, COMMAND); ages are relative to now_ms.
std::string format_runs_table(const nlohmann::json& runs, std::int64_t now_ms);

// Where this user's daemon lives: /run/capsule/capsule.sock and /var/lib/capsule for root, else under
// $XDG_RUNTIME_DIR and $XDG_STATE_HOME (~/.local/state). $CAPSULE_SOCKET (via --socket's envname) and
// $CAPSULE_STATE_DIR override them.
std::string default_socket_path();
std::string default_state_dir();
// capsuled next to the running capsule binary.
std::string capsuled_path();

// Subcommands. Each returns the process exit status and throws (ConnectError, ApiError, runtime_error) on
// failure; main prints "capsule: <what>".
int cmd_run(const std::string& socket, RunOptions options);
int cmd_runs_ls(const std::string& socket, const std::string& state, const std::string& label,
                std::optional<int> limit, const std::string& after, bool json);
int cmd_runs_show(const std::string& socket, const std::string& id);
int cmd_runs_logs(const std::string& socket, const std::string& id, bool stderr_stream, bool follow);
int cmd_runs_cancel(const std::string& socket, const std::string& id);
// DELETE /v1/runs/{id} for each id (finished runs: record and logs); prints each removed id, reports each
// failure on stderr and then exits 1.
int cmd_runs_rm(const std::string& socket, const std::vector<std::string>& ids);
int cmd_version(const std::string& socket);
// Replaces this process with capsuled in the foreground; returns only by throwing.
int cmd_daemon(const std::string& socket, const std::string& state_dir);

}  // namespace capsule::client

// The flags of a run, as ONE table shared by `capsule run` and capsule-launch (the same letter means the same
// thing in both), and the helpers that read what they hold: KEY=VALUE items, environment items, host paths.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace capsule::client {

// Run flags as typed. Sizes and durations stay strings: `capsule run` passes them to the daemon, the one place
// parsing them for a run; capsule-launch parses them with base/units.
struct RunOptions {
  std::string image;                    // empty: the daemon's default image
  std::vector<std::string> argv;        // the command (after --)
  std::vector<std::string> env;         // K=V, or K to copy K from this process's environment
  std::vector<std::string> labels;      // K=V
  std::vector<std::string> junit;       // JUnit XML globs inside the workspace
  std::vector<std::string> classfiles;  // class-file globs (collect.classfiles)
  std::vector<std::string> coverage;    // JaCoCo/Cobertura XML globs (collect.coverage)
  std::optional<std::int64_t> tail_lines;  // collect.tail_lines
  std::vector<std::string> toolchains;  // NAME=VERSION (or python=auto), instead of an image
  std::string as_of;                    // YYYY-MM-DD for "auto" toolchains
  std::string workdir;                  // cwd inside the sandbox
  std::string workspace;                // host directory; relative paths are made absolute
  std::string mode;                     // cow | ro | rw
  std::string workspace_snapshot;       // a snapshot digest at /workspace (copy-on-write), instead of workspace
  bool reproducible = false;            // the workspace is snapshotted at submit and pinned
  std::string baseline;                 // a finished run whose test cases this run must keep (spec.baseline)
  bool allow_removed = false;           // baseline.allow_removed
  bool protect_test_config = false;     // new or changed test configuration fails the run's verdict
  std::vector<std::string> protect;     // --protect GLOB: read-only, and created/deleted matches fail the verdict
  std::string timeout;                  // limits.wall_time
  std::string cpu_time;                 // limits.cpu_time
  std::string kill_grace;               // limits.kill_grace
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

// One row each of the flag table (names, letters and help live in cli_args.cpp). Letters: -W workspace,
// -w workdir (as docker's), -m memory, -e env, -l label, -t toolchain, -i interactive, -d detach.
enum class RunFlag {
  kImage, kWorkspace, kMode, kWorkdir, kTimeout, kCpuTime, kKillGrace, kMemory, kCpus, kPids, kEnv, kLabel, kJunit,
  kClassfiles, kCoverage, kTailLines, kToolchain, kAsOf, kNetwork, kPolicy, kInteractive, kJson, kDetach,
  kWorkspaceSnapshot, kReproducible, kBaseline, kAllowRemoved, kProtectTestConfig,
  kProtect
};

// Registers `flags` (every row of the table when empty: `capsule run`) on `command`, bound to `options`.
void add_run_flags(CLI::App& command, RunOptions& options, std::initializer_list<RunFlag> flags = {});

// "KEY=VALUE" -> {KEY, VALUE}; throws std::invalid_argument naming `flag` when there is no '=' or no KEY.
std::pair<std::string, std::string> split_pair(const std::string& item, const char* flag);
// --env items in order: K=V as given, K alone copied from this process's environment (skipped when unset).
std::vector<std::pair<std::string, std::string>> env_assignments(const std::vector<std::string>& items);
// The command of `capsule run` / `session exec`: the words CLI11 left after the positionals (`remaining`), then
// what followed the first "--" on the command line; a "--" between both is kept as part of the command.
std::vector<std::string> command_argv(std::vector<std::string> remaining, bool separator_given,
                                      const std::vector<std::string>& after_separator);
// A host path as an absolute, normalized path without a trailing slash.
std::string absolute_path(const std::string& path);

}  // namespace capsule::client

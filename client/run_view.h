// A run as the user sees it: the process exit status of `capsule run` and capsule-launch (ONE rule), the
// summary line, the `runs ls` table. The only file that knows the field names of capsuled's run object.
//
// The exit status rule of `capsule run`, `capsule session exec|attach` and capsule-launch (docker/podman and
// timeout(1) conventions; kExitCodeHelp says the same to users):
//   the command exited (succeeded, failed)     its exit status (a failed run never exits 0: then 1)
//   a signal N ended it (signaled)             128 + N   (137 for SIGKILL; a signal out of 1..127: 125)
//   timed_out (the wall or CPU time limit)     124       (timeout(1))
//   idle_timed_out (an exec's idle timeout)    124
//   oom_killed, cancelled                      137       (128 + SIGKILL, as docker reports a kill or an OOM)
//   setup_failed at exec                       126 the command cannot be executed, 127 it was not found
//   capsule itself failed: setup_failed, internal_error, interrupted (daemon restart), any other state,
//     an invalid spec or flags, a daemon or connection error, output this client could not relay whole   125
//   interrupted a second time: this client stops waiting for the run (`capsule runs show ID`)       130
//   the command succeeded (exit 0) but the run's verdict failed: its baseline check did not pass or it has
//     protect_violations (`--baseline`, `--protect-test-config`)                                    123
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/result.h"

namespace capsule::client {

inline constexpr int kExitTimedOut = 124;
inline constexpr int kExitCapsuleFailed = 125;
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;
inline constexpr int kExitKilled = 137;          // 128 + SIGKILL
inline constexpr int kExitStoppedWaiting = 130;  // 128 + SIGINT
inline constexpr int kExitVerdictFailed = 123;   // exit 0, but record.baseline or record.protect_violations fail it

// The rule above for users: the --help of `capsule run`, `capsule session exec|attach` and capsule-launch shows
// it; `capsule --help` shows kOtherExitCodesHelp, which points there (other subcommands show neither).
extern const char* const kExitCodeHelp;
extern const char* const kOtherExitCodesHelp;

// How a run ended, in the terms of the rule: from a run object or from capsule-launch's sandbox Result.
struct RunEnding {
  std::string state;                    // a run state (docs/api.md) = a sandbox status name
  int exit_code = 0;                    // the command's, when it exited; 126/127 for setup_failed at exec
  int signal = 0;                       // the signal that ended it, if any
  std::uint64_t bytes_not_relayed = 0;  // output this client fell too far behind to receive
  bool verdict_failed = false;          // the record's baseline check or protect_violations fail the run
};

RunEnding ending_of(const nlohmann::json& run);
// capsule-launch's Result (header-only: only capsule-launch and the tests link capsule_sandbox).
inline RunEnding ending_of(const sandbox::Result& result) {
  return {sandbox::status_name(result.status), result.exit_code, result.signal};
}
int exit_code_for(const RunEnding& ending);
int exit_code_for(const nlohmann::json& run);
// The run's id ("" when missing).
std::string id_of(const nlohmann::json& run);

// "capsule: run ID STATE in 1.23 s (exit 0)", with the reason for abnormal ends and, when the record has them,
// how capsuled ended the command (termination reason, KILL, signal), the JUnit counts or tests.state and a
// compile error, the class-file majors and the coverage percentages.
std::string summary_line(const nlohmann::json& run);
// Why `capsule run` exits 125 although the run itself may have passed: its stdout/stderr are not whole.
std::string not_relayed_line(const std::string& id, std::uint64_t bytes);
// "1.25s", "3m05s", "2h10m": a wall time in a table cell.
std::string short_duration(std::int64_t ms);
// "12 total, 2 failed, 1 errors, 0 skipped" of a tests object ({total, failed, errors, skipped}); "" when none ran.
std::string test_counts(const nlohmann::json& tests);
// "12s ago", "5m ago", "3h ago", "2d ago" for an age of `ms` milliseconds (negative ages read as 0).
std::string age(std::int64_t ms);
// `text` on one table row: newline, CR and tab as \n, \r, \t, other control characters as \xNN; longer than
// `max_width` characters (UTF-8 aware, never splitting one): its first max_width - 3 and "...".
std::string one_line(std::string_view text, std::size_t max_width = std::string_view::npos);
// Rows (the first is the header) as columns 3 spaces apart, left-aligned, without trailing blanks; every cell
// through one_line(), so no value breaks a row.
std::string format_columns(const std::vector<std::vector<std::string>>& rows);
// The `runs ls` table (ID, STATE, EXIT, WALL, CREATED, COMMAND); ages are relative to now_ms.
std::string format_runs_table(const nlohmann::json& runs, std::int64_t now_ms);

// Writes all of `bytes` to `fd` (the command's output relayed to ours); gives up silently on a closed fd.
void relay_output(int fd, std::string_view bytes);

}  // namespace capsule::client

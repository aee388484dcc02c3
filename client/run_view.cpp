// The run object turned into what the CLI prints and exits with. Every field name of the run object the CLI
// reads is here, so a change of its shape (docs/api.md) is a change of this file only.
#include "client/run_view.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "client/json_read.h"

namespace capsule::client {
namespace {

using nlohmann::json;

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

}  // namespace

std::string short_duration(std::int64_t ms) {
  if (ms < 60000) return fixed(static_cast<double>(ms) / 1000.0, 2) + "s";
  char buffer[64];
  if (ms < 3600000) std::snprintf(buffer, sizeof buffer, "%dm%02ds", int(ms / 60000), int(ms / 1000 % 60));
  else std::snprintf(buffer, sizeof buffer, "%dh%02dm", int(ms / 3600000), int(ms / 60000 % 60));
  return buffer;
}

std::string test_counts(const json& tests) {
  if (number(tests, "total") <= 0) return "";
  return std::to_string(number(tests, "total")) + " total, " + std::to_string(number(tests, "failed")) + " failed, " +
         std::to_string(number(tests, "errors")) + " errors, " + std::to_string(number(tests, "skipped")) + " skipped";
}

namespace {

std::string shell_quote(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,@%+-") == std::string::npos;
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The command of a run or exec, as typed (a script as sh -c '...'); one_line() puts it on one table row.
std::string command_text(const json& run) {
  const json& spec = member(run, "spec");
  std::string out;
  if (spec.contains("script") && spec["script"].is_string()) {
    out = "sh -c " + shell_quote(spec["script"].get<std::string>());
  }
  for (const auto& arg : spec.value("argv", json::array())) {
    if (!out.empty()) out += ' ';
    out += shell_quote(arg.is_string() ? arg.get<std::string>() : arg.dump());
  }
  return out;
}

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// Characters (not bytes) of `text`: what a terminal's columns hold for text without control characters.
std::size_t display_width(std::string_view text) {
  const auto starts = std::count_if(text.begin(), text.end(), [](char c) { return !is_utf8_continuation(c); });
  return static_cast<std::size_t>(starts);
}

constexpr std::size_t kCommandWidth = 48;  // the runs table's COMMAND column

bool is_live(const std::string& state) { return state == "queued" || state == "running"; }

std::string percent(std::int64_t covered, std::int64_t total) {
  return fixed(100.0 * static_cast<double>(covered) / static_cast<double>(total), 1) + "%";
}

// "; wall_time: TERM, KILL after 5.00 s, signal 9" when capsuled signalled the command.
std::string termination_part(const json& result) {
  const json& termination = member(result, "termination");
  if (termination.empty()) return "";
  std::string part = "; " + text(termination, "reason") + ": TERM";
  const json& sent = termination.value("sent", json::array());
  if (sent.is_array() && std::find(sent.begin(), sent.end(), json("KILL")) != sent.end()) {
    part += ", KILL after " + fixed(static_cast<double>(number(termination, "kill_after_ms")) / 1000.0, 2) + " s";
  }
  if (number(result, "signal") > 0) part += ", signal " + std::to_string(number(result, "signal"));
  return part;
}

// "; tests: 12 total, 2 failed, 1 errors, 0 skipped" or, with no test counted, "; tests: not_run"; then
// ", compile error" when the output showed one.
std::string tests_part(const json& tests) {
  std::string part;
  if (number(tests, "total") > 0) {
    part = "; tests: " + test_counts(tests);
  } else if (!text(tests, "state").empty()) {
    part = "; tests: " + text(tests, "state");
  }
  if (tests.contains("compile_error") && tests["compile_error"] == true) {
    part += (part.empty() ? "; " : ", ") + std::string("compile error");
  }
  return part;
}

// "; class files: major 61 x120, 52 x3" (most common first).
std::string classfiles_part(const json& classfiles) {
  std::vector<std::pair<std::int64_t, std::string>> majors;
  for (const auto& [major, count] : member(classfiles, "majors").items()) {
    if (count.is_number()) majors.emplace_back(count.get<std::int64_t>(), major);
  }
  if (majors.empty()) return "";
  std::stable_sort(majors.begin(), majors.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string part = "; class files: major";
  for (std::size_t i = 0; i < majors.size(); ++i) {
    part += (i == 0 ? " " : ", ") + majors[i].second + " x" + std::to_string(majors[i].first);
  }
  return part;
}

// "; coverage: lines 80.0%, branches 25.0%" over the reports' totals (a kind with nothing to cover is left out).
std::string coverage_part(const json& coverage) {
  std::string part;
  for (const char* kind : {"lines", "branches"}) {
    const json& counts = member(member(coverage, "total"), kind);
    if (number(counts, "total") <= 0) continue;
    part += (part.empty() ? "; coverage: " : ", ") + std::string(kind) + " " +
            percent(number(counts, "covered"), number(counts, "total"));
  }
  return part;
}

// The record's baseline check did not pass (absent: nothing to fail).
bool baseline_failed(const json& run) {
  const json& baseline = member(run, "baseline");
  return !baseline.empty() && text(baseline, "verdict") != "passed";
}

std::size_t protect_violations(const json& run) {
  if (!run.is_object() || !run.contains("protect_violations") || !run["protect_violations"].is_array()) return 0;
  return run["protect_violations"].size();
}

// "; baseline r1 regressed: 202 removed, 0 newly skipped; 1 protect violation" when those fail the verdict.
std::string verdict_part(const json& run) {
  std::string part;
  const json& baseline = member(run, "baseline");
  if (baseline_failed(run)) {
    part += "; baseline ";
    part += text(baseline, "run");
    part += " ";
    part += text(baseline, "verdict");
    if (baseline.contains("removed")) {
      part += ": ";
      part += std::to_string(number(member(baseline, "removed"), "count"));
      part += " removed, ";
      part += std::to_string(number(member(baseline, "newly_skipped"), "count"));
      part += " newly skipped";
    }
  }
  if (const std::size_t violations = protect_violations(run); violations > 0) {
    part += "; ";
    part += std::to_string(violations);
    part += violations == 1 ? " protect violation" : " protect violations";
  }
  return part;
}

}  // namespace

const char* const kExitCodeHelp =
    "Exit status of `capsule run`, `capsule session exec|attach` and capsule-launch: the command's own exit\n"
    "status; 128+N when signal N ended it (137: SIGKILL); 124 when it hit its time limit (--timeout,\n"
    "--cpu-time) or an exec's --idle-timeout; 137 when it was OOM-killed or cancelled; 126/127 when the\n"
    "command could not be executed/found; 125 when capsule itself failed: the sandbox could not be set up,\n"
    "the flags or spec are invalid, the daemon failed or rejected the request, or this client fell so far\n"
    "behind the command's output that some was not relayed (`capsule runs logs ID` has it all); 130 when\n"
    "interrupted twice (it stops waiting; attach: at once); 123 when the command exited 0 but the run's verdict\n"
    "failed: --baseline found cases removed or newly skipped, or --protect-test-config saw test configuration\n"
    "changed (record.baseline, record.protect_violations). Other subcommands exit 2 on usage errors and on\n"
    "other errors 125 (`session`) or 1.";

const char* const kOtherExitCodesHelp =
    "Exit status: `capsule run --help` tells what `capsule run` and `capsule session exec|attach` exit with; the\n"
    "other subcommands exit 0 on success, 2 on usage errors and on other errors 125 (`session`) or 1.";

RunEnding ending_of(const json& run) {
  const json& result = member(run, "result");
  RunEnding ending{text(run, "state"), static_cast<int>(number(result, "exit_code")),
                   static_cast<int>(number(result, "signal"))};
  ending.verdict_failed = baseline_failed(run) || protect_violations(run) > 0;
  return ending;
}

int exit_code_for(const RunEnding& ending) {
  if (ending.bytes_not_relayed > 0) return kExitCapsuleFailed;
  const std::string& state = ending.state;
  if (state == "succeeded") return ending.exit_code == 0 && ending.verdict_failed ? kExitVerdictFailed : ending.exit_code;
  if (state == "failed") return ending.exit_code != 0 ? ending.exit_code : 1;
  if (state == "timed_out" || state == "idle_timed_out") return kExitTimedOut;
  if (state == "oom_killed" || state == "cancelled") return kExitKilled;
  if (state == "signaled") return ending.signal > 0 && ending.signal < 128 ? 128 + ending.signal : kExitCapsuleFailed;
  if (state == "setup_failed" && (ending.exit_code == kExitCannotExecute || ending.exit_code == kExitNotFound)) {
    return ending.exit_code;
  }
  return kExitCapsuleFailed;
}

int exit_code_for(const json& run) { return exit_code_for(ending_of(run)); }

std::string id_of(const json& run) { return text(run, "id"); }

std::string summary_line(const json& run) {
  const std::string state = text(run, "state");
  const json& result = member(run, "result");
  std::string line = "capsule: run " + id_of(run) + " " + state + " in " +
                     fixed(static_cast<double>(number(result, "wall_ms")) / 1000.0, 2) + " s";
  const std::string reason = text(result, "reason");
  if (state != "succeeded" && state != "failed" && !reason.empty()) line += ": " + reason;
  line += " (exit " + std::to_string(exit_code_for(run)) + termination_part(result) + tests_part(member(run, "tests")) +
          classfiles_part(member(run, "classfiles")) + coverage_part(member(run, "coverage")) + verdict_part(run);
  return line + ")";
}

std::string age(std::int64_t ms) {
  const std::int64_t s = std::max<std::int64_t>(ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s ago";
  if (s < 3600) return std::to_string(s / 60) + "m ago";
  if (s < 86400) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

std::string not_relayed_line(const std::string& id, std::uint64_t bytes) {
  return "capsule: " + std::to_string(bytes) + " bytes of the command's output were not relayed (this client fell " +
         "behind the command); `capsule runs logs " + id + "` has all of it";
}

std::string one_line(std::string_view text, std::size_t max_width) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (byte < 0x20 || byte == 0x7f) out += std::string("\\x") + kHex[byte >> 4] + kHex[byte & 0xf];
    else out += c;
  }
  if (max_width < 3 || display_width(out) <= max_width) return out;
  std::size_t kept = 0, end = 0;  // keep max_width - 3 characters, then "..."
  while (end < out.size() && kept < max_width - 3) {
    ++end;
    while (end < out.size() && is_utf8_continuation(out[end])) ++end;
    ++kept;
  }
  return out.substr(0, end) + "...";
}

std::string format_columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : rows) {
    cells.emplace_back();
    for (const auto& cell : row) cells.back().push_back(one_line(cell));
  }
  std::vector<std::size_t> widths(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  }
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - display_width(row[i]) + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string format_runs_table(const json& runs, std::int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "EXIT", "WALL", "CREATED", "COMMAND"}};
  for (const auto& run : runs) {
    const std::string state = text(run, "state");
    const json& result = member(run, "result");
    const json& times = member(run, "times");
    std::string wall = "-";
    if (result.contains("wall_ms")) wall = short_duration(number(result, "wall_ms"));
    else if (state == "running" && number(times, "started") > 0) wall = short_duration(now_ms - number(times, "started"));
    rows.push_back({id_of(run), state, is_live(state) ? "-" : std::to_string(exit_code_for(run)), wall,
                    age(now_ms - number(times, "created")), one_line(command_text(run), kCommandWidth)});
  }
  return format_columns(rows);
}

void relay_output(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace capsule::client

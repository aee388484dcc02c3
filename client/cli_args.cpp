// The run flag table and its readers: one row per flag so `capsule run` and capsule-launch cannot drift apart
// in letters or help; values stay as typed until the command that uses them.
#include "client/cli_args.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <variant>

namespace capsule::client {
namespace {

using Binding = std::variant<std::string RunOptions::*, std::vector<std::string> RunOptions::*,
                             std::optional<double> RunOptions::*, std::optional<std::int64_t> RunOptions::*,
                             bool RunOptions::*>;

struct RunFlagRow {
  RunFlag flag;
  const char* names;  // CLI11 spelling: "--long,-x", or a positional's name
  const char* help;
  Binding field;
};

const RunFlagRow kRunFlags[] = {
    {RunFlag::kImage, "image", "image to run in (default: the daemon's, \"host\")", &RunOptions::image},
    {RunFlag::kWorkspace, "--workspace,-W", "host directory mounted at /workspace", &RunOptions::workspace},
    {RunFlag::kMode, "--mode", "workspace mode: cow (changes stay in the run, default), ro, rw", &RunOptions::mode},
    {RunFlag::kWorkdir, "--workdir,-w", "working directory inside the sandbox", &RunOptions::workdir},
    {RunFlag::kTimeout, "--timeout", "wall-clock limit, e.g. 90s, 10m", &RunOptions::timeout},
    {RunFlag::kCpuTime, "--cpu-time", "CPU time limit of the whole sandbox, e.g. 5m", &RunOptions::cpu_time},
    {RunFlag::kKillGrace, "--kill-grace",
     "time between SIGTERM and SIGKILL when the time limit ends the command or it is cancelled, e.g. 10s",
     &RunOptions::kill_grace},
    {RunFlag::kMemory, "--memory,-m", "memory limit, e.g. 512m, 4g", &RunOptions::memory},
    {RunFlag::kCpus, "--cpus", "CPU bandwidth in cores", &RunOptions::cpus},
    {RunFlag::kPids, "--pids", "maximum number of processes", &RunOptions::pids},
    {RunFlag::kEnv, "--env,-e", "environment variable K=V (K alone copies it from here)", &RunOptions::env},
    {RunFlag::kLabel, "--label,-l", "label K=V (filter with `runs ls --label`)", &RunOptions::labels},
    {RunFlag::kJunit, "--junit", "JUnit XML glob in the workspace, counted into the record", &RunOptions::junit},
    {RunFlag::kClassfiles, "--collect-classfiles",
     "class-file glob in the workspace, its major versions counted into the record", &RunOptions::classfiles},
    {RunFlag::kCoverage, "--collect-coverage",
     "JaCoCo or Cobertura (coverage.py) XML glob in the workspace, summed into the record", &RunOptions::coverage},
    {RunFlag::kTailLines, "--tail-lines",
     "how many last lines of stdout and stderr the record keeps (default 100, max 10000)", &RunOptions::tail_lines},
    {RunFlag::kToolchain, "--toolchain,-t", "pick the image by toolchain: java=17, python=3.11, python=auto",
     &RunOptions::toolchains},
    {RunFlag::kAsOf, "--as-of",
     "date (YYYY-MM-DD, or a span before today: '7 days', '2 weeks', P7D; stored as the date it means) that "
     "python=auto is chosen for, and that --network proxy shows packages as of",
     &RunOptions::as_of},
    {RunFlag::kNetwork, "--network",
     "none (loopback only) or proxy (also the date-masked PyPI/Maven proxy on 127.0.0.1:3141; needs --as-of)",
     &RunOptions::network},
    {RunFlag::kPolicy, "--policy", "seccomp policy name", &RunOptions::policy},
    {RunFlag::kInteractive, "--interactive,-i", "send this process's stdin to the command", &RunOptions::interactive},
    {RunFlag::kJson, "--json", "print the finished run object instead of the command's output", &RunOptions::json},
    {RunFlag::kDetach, "--detach,-d", "submit the run, print its id and return", &RunOptions::detach},
    {RunFlag::kWorkspaceSnapshot, "--workspace-snapshot",
     "a snapshot (sha256:..., from `capsule snapshot create`) at /workspace, copy-on-write", &RunOptions::workspace_snapshot},
    {RunFlag::kReproducible, "--reproducible",
     "snapshot the --workspace directory at submit and pin it (pinned.workspace_digest)", &RunOptions::reproducible},
    {RunFlag::kBaseline, "--baseline",
     "a finished run (id) whose test cases this one must keep: a case removed or newly skipped fails the run's "
     "verdict (record.baseline; exit 123 when the command itself exited 0); needs --junit", &RunOptions::baseline},
    {RunFlag::kAllowRemoved, "--allow-removed",
     "with --baseline: list removed or newly skipped cases without failing for them", &RunOptions::allow_removed},
    {RunFlag::kProtectTestConfig, "--protect-test-config",
     "fail the run's verdict when it adds or changes test configuration (conftest.py, pytest.ini, [pytest] "
     "sections, surefire/failsafe skips and excludes in pom.xml): record.protect_violations",
     &RunOptions::protect_test_config},
    {RunFlag::kProtect, "--protect",
     "glob of workspace paths the run may not change (repeatable), e.g. 'tests/**' or conftest.py: they are "
     "read-only, and a matching file it adds or deletes fails the run's verdict (record.protect_violations); "
     "needs a cow or ro workspace", &RunOptions::protect},
};

void add_row(CLI::App& command, RunOptions& options, const RunFlagRow& row) {
  std::visit(
      [&](auto field) {
        auto& value = options.*field;
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, bool>) {
          command.add_flag(row.names, value, row.help);
        } else if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::vector<std::string>>) {
          command.add_option(row.names, value, row.help)->allow_extra_args(false);  // -e A=1 -- cmd: no swallowing
        } else {
          command.add_option(row.names, value, row.help);
        }
      },
      row.field);
}

}  // namespace

void add_run_flags(CLI::App& command, RunOptions& options, std::initializer_list<RunFlag> flags) {
  for (const RunFlagRow& row : kRunFlags) {
    if (flags.size() == 0 || std::find(flags.begin(), flags.end(), row.flag) != flags.end()) {
      add_row(command, options, row);
    }
  }
}

std::pair<std::string, std::string> split_pair(const std::string& item, const char* flag) {
  const auto equals = item.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw std::invalid_argument(std::string(flag) + " '" + item + "': expected KEY=VALUE");
  }
  return {item.substr(0, equals), item.substr(equals + 1)};
}

std::vector<std::pair<std::string, std::string>> env_assignments(const std::vector<std::string>& items) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& item : items) {
    if (item.find('=') == std::string::npos && !item.empty()) {
      if (const char* value = std::getenv(item.c_str())) out.emplace_back(item, value);
      continue;
    }
    out.push_back(split_pair(item, "--env"));
  }
  return out;
}

std::vector<std::string> command_argv(std::vector<std::string> remaining, bool separator_given,
                                      const std::vector<std::string>& after_separator) {
  if (!remaining.empty() && separator_given) remaining.push_back("--");
  remaining.insert(remaining.end(), after_separator.begin(), after_separator.end());
  return remaining;
}

std::string absolute_path(const std::string& path) {
  std::string out = std::filesystem::absolute(path).lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace capsule::client

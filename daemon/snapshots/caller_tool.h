// Runs a host tool (tar, git, find) as a caller: a forked child takes on exactly the caller's uid, gid and groups
// (real, effective and saved) and execs with a given environment; its stdout goes, bounded, to a file or a sink.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "daemon/auth.h"

namespace capsule::daemon {

struct CallerTool {
  std::vector<std::string> argv;  // argv[0]: an absolute path
  std::vector<std::string> env;   // KEY=VALUE, the whole environment
  int cwd_fd = -1;                // the directory it starts in (opened as the caller)
  int stdout_fd = -1;             // where its output goes (through the daemon, counted), unless stdout_sink is set
  std::uint64_t max_stdout = 0;   // more than this: stopped, 413 snapshot_too_large naming `limit_name`
  std::string limit_name;
  std::chrono::seconds timeout{600};
  std::function<void(const char* data, std::size_t size)> stdout_sink{};  // set: its output goes here instead
};

struct ToolOutcome {
  int exit_code = -1;       // -1: killed by a signal
  std::string stderr_tail;  // its last 4 KiB of stderr
};

// Runs `tool` as `caller` (a caller without credentials is refused: 403). Throws http::ApiError 413 for output
// over the bound, 400 snapshot_source_failed for a timeout or a tool that could not be started.
ToolOutcome run_tool_as(const Caller& caller, const CallerTool& tool);

}  // namespace capsule::daemon

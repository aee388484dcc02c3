// Result -> JSON and status names; the record shape follows ../shared/ARCHITECTURE.md.
// Byte streams are emitted as UTF-8 with invalid sequences replaced, never dropped.
#include "sandbox/result_json.h"

#include "sandbox/output.h"

namespace capsule::sandbox {
namespace {

nlohmann::json stream_to_json(const StreamCapture& capture, std::size_t tail_lines) {
  nlohmann::json lines = nlohmann::json::array();
  for (const std::string& line : last_lines(capture.tail, tail_lines, kMaxTailLinesBytes)) {
    lines.push_back(to_valid_utf8(line));
  }
  nlohmann::json j = {{"bytes", capture.total_bytes},
                      {"truncated", capture.truncated},
                      {"head", to_valid_utf8(capture.head)},
                      {"tail", to_valid_utf8(capture.tail)},
                      {"tail_lines", std::move(lines)}};
  if (!capture.spill_path.empty()) j["spill_path"] = capture.spill_path;
  return j;
}

// null when capsule sent no signal; else why, and which: {"reason", "sent": ["TERM"] or ["TERM", "KILL"],
// "kill_after_ms" (with KILL)}.
nlohmann::json termination_to_json(const Termination& termination) {
  if (termination.reason.empty() && !termination.kill_sent) return nullptr;
  nlohmann::json j = {{"reason", termination.reason}, {"sent", {"TERM"}}};
  if (termination.kill_sent) {
    j["sent"].push_back("KILL");
    j["kill_after_ms"] = termination.kill_after_ms;
  }
  return j;
}

}  // namespace

std::string to_valid_utf8(std::string_view bytes) {
  // nlohmann's serializer already knows how to replace invalid sequences with U+FFFD; reuse it.
  const std::string quoted =
      nlohmann::json(std::string(bytes)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(quoted).get<std::string>();
}

const char* status_name(Status status) {
  switch (status) {
    case Status::kSucceeded: return "succeeded";
    case Status::kFailed: return "failed";
    case Status::kTimedOut: return "timed_out";
    case Status::kIdleTimedOut: return "idle_timed_out";
    case Status::kOomKilled: return "oom_killed";
    case Status::kSignaled: return "signaled";
    case Status::kCancelled: return "cancelled";
    case Status::kSetupFailed: return "setup_failed";
    case Status::kInternalError: return "internal_error";
  }
  return "internal_error";
}

nlohmann::json result_to_json(const Result& result, std::size_t tail_lines) {
  nlohmann::json j = {
      {"status", status_name(result.status)},
      {"reason", result.reason},
      {"exit_code", result.exit_code},
      {"signal", result.signal},
      {"termination", termination_to_json(result.termination)},
      {"wall_ms", result.wall_ms},
      {"cpu_user_ms", result.cpu_user_ms},
      {"cpu_sys_ms", result.cpu_sys_ms},
      {"peak_memory_bytes", result.peak_memory_bytes},
      {"oom_kills", result.oom_kills},
      {"pooled", result.setup.pooled},
      {"stdout", stream_to_json(result.stdout_capture, tail_lines)},
      {"stderr", stream_to_json(result.stderr_capture, tail_lines)},
      {"setup_ms",
       {{"prepare", result.setup.prepare_ms},
        {"clone", result.setup.clone_ms},
        {"maps", result.setup.maps_ms},
        {"mounts", result.setup.mounts_ms},
        {"seccomp", result.setup.seccomp_ms},
        {"exec", result.setup.exec_ms},
        {"total", result.setup.total_ms}}},
  };
  return j;
}

}  // namespace capsule::sandbox

// Result: what one sandbox run produced, including why it ended and how long each setup step took.
// Serialised to JSON by result_json.h for records and the CLI.
#pragma once

#include <cstdint>
#include <string>

namespace capsule::sandbox {

enum class Status {
  kSucceeded, kFailed, kTimedOut, kIdleTimedOut, kOomKilled, kSignaled, kCancelled, kSetupFailed, kInternalError
};

const char* status_name(Status status);

struct StreamCapture {
  std::uint64_t total_bytes = 0;
  bool truncated = false;  // head + tail hold less than total_bytes
  std::string head;
  std::string tail;        // the stream's last bytes (at most cap - cap/2), always; overlaps head unless truncated
  std::string spill_path;  // where the full stream went, if requested
};

// Milliseconds from one steady-clock reading in ns to a later one (0 when they are out of order): setup timings.
inline double ms_between(std::int64_t from_ns, std::int64_t to_ns) {
  return to_ns > from_ns ? static_cast<double>(to_ns - from_ns) / 1e6 : 0.0;
}

struct SetupTimings {  // milliseconds, measured by the launcher
  double prepare_ms = 0;  // spec checks, scratch dirs, cgroup, seccomp program (cached per profile)
  double clone_ms = 0;    // clone3 + exec of the sandbox init
  double maps_ms = 0;     // uid/gid maps, idmapped mounts, cgroup placement
  double mounts_ms = 0;   // rootfs, binds, /proc, /dev, pivot_root
  double seccomp_ms = 0;  // privileges dropped and filter loaded
  double exec_ms = 0;     // until execve of the command succeeded
  double total_ms = 0;
  bool pooled = false;    // the box was made ahead (BoxPool): the run began when it was taken, its steps above are 0
};

// Why capsule signalled the command, when it did: TERM first, KILL after the grace if it was still there.
// A kernel OOM kill is not capsule's doing: it shows in oom_kills and the status, not here.
struct Termination {
  std::string reason;        // "wall_time", "idle_timeout", "cpu_time", "cancelled"; empty: capsule sent nothing
  bool kill_sent = false;    // TERM was not enough: KILL followed after the grace
  double kill_after_ms = 0;  // TERM -> KILL, when kill_sent
};

struct Result {
  Status status = Status::kInternalError;
  std::string reason;  // human-readable cause, with step/errno/path for setup failures
  int exit_code = -1;  // valid when the command exited
  int signal = 0;      // the signal that ended the command (its wait status), 0 when it exited
  Termination termination;
  double wall_ms = 0;
  double cpu_user_ms = 0;
  double cpu_sys_ms = 0;
  std::uint64_t peak_memory_bytes = 0;
  std::uint64_t oom_kills = 0;
  StreamCapture stdout_capture;
  StreamCapture stderr_capture;
  SetupTimings setup;
};

}  // namespace capsule::sandbox

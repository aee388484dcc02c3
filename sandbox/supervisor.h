// Supervisor: the launcher's event loop for one started sandbox. Polls the init pidfd, the control
// channel and the output pipes; enforces wall and CPU time and cancellation (TERM, grace, KILL).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "sandbox/cgroup.h"
#include "sandbox/error.h"
#include "sandbox/launcher.h"
#include "sandbox/output.h"

namespace capsule::sandbox {

struct SupervisedFds {
  int pidfd;
  int control;
  int stdout_read;
  int stderr_read;
  int stdin_write;  // -1 when there is nothing to feed
};

// What happened, as seen from outside; the launcher turns it into a Result.
struct Outcome {
  std::optional<std::int64_t> ready_ns;     // init finished the filesystem
  std::optional<std::int64_t> seccomp_ns;   // command about to load its filter
  std::optional<std::int64_t> exec_ns;      // command's execve succeeded
  std::optional<ErrorCause> setup_error;    // init or the command reported a failure
  std::optional<int> exit_code;             // command exited
  std::optional<int> exit_signal;           // command was killed by a signal
  int init_wait_status = 0;                 // si_code/si_status of init, for crashes before reporting
  int init_wait_code = 0;
  std::int64_t end_ns = 0;
  bool wall_timeout = false;
  bool cpu_timeout = false;
  bool cancelled = false;
};

class Supervisor {
 public:
  Supervisor(const SupervisedFds& fds, Cgroup& cgroup, const Limits& limits, const RunHooks& hooks,
             std::string stdin_data, std::int64_t start_ns);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;
  // Runs until init has exited and the output pipes are drained. Throws SandboxError on poll failures.
  Outcome run(OutputCapture& out, OutputCapture& err);

 private:
  void handle_event(const std::string& message);
  void start_termination(std::int64_t now);
  void escalate_to_kill();
  void feed_stdin();
  void close_fds();  // all but the pidfd, which the caller owns

  SupervisedFds fds_;
  Cgroup& cgroup_;
  Limits limits_;
  const RunHooks& hooks_;
  std::string stdin_data_;
  std::size_t stdin_offset_ = 0;
  std::int64_t start_ns_;
  std::optional<std::int64_t> kill_at_ns_;
  bool killed_ = false;
  Outcome outcome_;
};

}  // namespace capsule::sandbox

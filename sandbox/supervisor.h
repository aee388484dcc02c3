// Supervisor: the event-driven watcher of one started sandbox. It reacts to the init pidfd, the control
// channel and the output pipes, and enforces wall time, CPU time and cancellation (TERM, grace, KILL).
// Drive it with run() (a private poll loop) or from any event loop via interest()/handle()/tick().
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "sandbox/cgroup.h"
#include "sandbox/error.h"
#include "sandbox/hooks.h"
#include "sandbox/spec.h"
#include "sandbox/output.h"

namespace capsule::sandbox {

struct SupervisedFds {
  int pidfd;        // borrowed: the caller closes it
  int control;      // owned from here on, like the three below
  int stdout_read;
  int stderr_read;
  int stdin_write;  // -1 when there is nothing to feed
};

// What happened, as seen from outside; the launcher turns it into a Result.
struct Outcome {
  std::optional<std::int64_t> ready_ns;     // init finished the filesystem
  std::optional<std::int64_t> seccomp_ns;   // command about to load its filter
  std::optional<std::int64_t> exec_ns;      // command's execve succeeded
  std::optional<base::Cause> setup_error;    // init or the command reported a failure
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
  Supervisor(const SupervisedFds& fds, Cgroup& cgroup, const Limits& limits, RunHooks hooks, std::string stdin_data,
             std::int64_t start_ns, OutputCapture& out, OutputCapture& err);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Descriptors to wait on, with the events wanted; empty once finished().
  std::vector<pollfd> interest() const;
  // CLOCK_MONOTONIC ns at which tick() must run next, or 0 when only descriptors matter.
  std::int64_t next_deadline() const;
  void handle(int fd, short revents);
  void tick(std::int64_t now_ns);
  void cancel();  // TERM, grace, KILL, ending as cancelled
  bool finished() const;
  const Outcome& outcome() const { return outcome_; }

  // Blocking: polls until finished(). Throws SandboxError on poll failures.
  const Outcome& run();

 private:
  void handle_event(const std::string& message);
  void read_output(int& fd, bool is_stdout);
  void start_termination(std::int64_t now);
  void escalate_to_kill();
  void feed_stdin();
  void close_fds();  // all but the pidfd, which the caller owns

  SupervisedFds fds_;
  Cgroup& cgroup_;
  Limits limits_;
  RunHooks hooks_;
  OutputCapture& out_;
  OutputCapture& err_;
  std::string stdin_data_;
  std::size_t stdin_offset_ = 0;
  std::int64_t wall_deadline_ = 0;
  std::int64_t next_cpu_check_ = 0;
  std::int64_t drain_deadline_ = 0;
  std::optional<std::int64_t> kill_at_ns_;
  bool init_alive_ = true;
  bool killed_ = false;
  Outcome outcome_;
};

}  // namespace capsule::sandbox

// Sandbox: a live box made from an EnvironmentSpec (Launcher::create), and Exec: one process tree running in it.
// Lifecycle verbs, one file each: sandbox_create.cpp, sandbox_exec.cpp, sandbox_control.cpp, sandbox_destroy.cpp.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "sandbox/cgroup.h"
#include "sandbox/disk_budget.h"
#include "sandbox/hooks.h"
#include "sandbox/output.h"
#include "sandbox/result.h"
#include "sandbox/scratch.h"
#include "sandbox/spec.h"
#include "sandbox/start_gate.h"

namespace capsule::sandbox {

class Exec;

// Setup steps of the box, CLOCK_MONOTONIC ns (0: not reached). `taken`: when a run took it from a BoxPool (0: it
// was made for its run).
struct BoxTimes {
  std::int64_t start = 0, prepared = 0, cloned = 0, mapped = 0, ready = 0, taken = 0;
};

// Drive it from one thread: poll interest() of the box and of each of its execs, hand every ready descriptor to
// handle() (the box routes init's events to its execs), call tick() at their deadlines. Destroying it without
// destroy() does the same: kills everything, removes its cgroup and scratch directory.
class Sandbox {
 public:
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  // Starts a process tree in a cgroup of its own below the box's. The Exec must be destroyed before the box.
  // Throws SandboxError (step "exec") when the box has ended or a pipe, cgroup or channel step fails.
  std::unique_ptr<Exec> exec(const ProcessSpec& spec, RunHooks hooks = {});
  // Signals every process of the box but init (the cgroup's members).
  void signal(int signo);
  // Stops / resumes every process (the cgroup freezer); a frozen box serves no exec until thawed.
  void freeze();
  void thaw();
  bool frozen() const { return frozen_; }
  // Kills everything, reaps init and removes the cgroup and scratch directory. Idempotent; never throws.
  void destroy();

  std::vector<pollfd> interest() const;
  void handle(int fd, short revents);
  // True once init has exited (crashed, or a one-shot box ended) and its channel is drained.
  bool ended() const { return !init_alive_ && control_ < 0; }
  // init has finished the filesystem and serves execs.
  bool ready() const { return times_.ready != 0; }
  // Why the box could not be set up (init reported it before ready), if so.
  const std::optional<base::Cause>& setup_error() const { return setup_error_; }
  int init_wait_code() const { return init_wait_code_; }
  int init_wait_status() const { return init_wait_status_; }

  CgroupUsage usage() const;
  std::uint64_t oom_kills() const;  // usage().oom_kills, read alone
  // Makes the next exec's cgroup ahead of time (a session calls it once an exec has been answered), and has
  // init fork that exec's child into it: exec() then only hands over the command. Moving a process between
  // cgroups waits for an RCU grace period after a quiet spell (ms on v1), and the mkdirs cost too. Best
  // effort: a failure is met again, and reported, by exec().
  void prepare_exec();
  pid_t init_pid() const { return init_pid_; }
  // The box's name: its cgroup and its scratch directory under the launcher's scratch dir.
  const std::string& id() const { return id_; }
  // The box's root as its processes see it (/proc/<init>/root), O_PATH|O_DIRECTORY, for file operations that
  // must resolve inside it (openat2 RESOLVE_IN_ROOT). Throws SandboxError when init is gone.
  base::UniqueFd open_root() const;
  // The EnvironmentSpec's loopback_listeners as listening sockets inside the box's network namespace.
  // Ownership passes to the caller (the first call; later calls return nothing).
  std::vector<base::UniqueFd> take_listeners() { return std::move(listeners_); }
  const BoxTimes& times() const { return times_; }
  const EnvironmentSpec& environment() const { return environment_; }
  // The host id that sandbox id 0 maps to (files written into the box for sandbox uid u belong to base + u).
  std::uint32_t host_id_base() const { return host_id_base_; }
  std::uint32_t host_id_count() const { return host_id_count_; }  // ids the box has, from host_id_base() on
  // The host dir of the root filesystem's writable upper (on the box's disk when it has one), while the box lives.
  std::string rootfs_upper() const { return scratch_ ? scratch_->upper() : std::string(); }

 private:
  friend class Launcher;
  friend class Exec;
  friend class BoxPool;
  Sandbox() = default;
  void route_event(const std::string& message);
  void lost_init();
  void kill_init();  // SIGKILL to init: its pid namespace dies with it
  base::UniqueFd open_pty_master(std::uint16_t rows, std::uint16_t cols) const;
  // One exec's cgroup leaf and the descriptors its process joins it through (cgroup.procs of each hierarchy).
  struct ExecCgroup {
    std::uint64_t id = 0;
    std::unique_ptr<Cgroup> cgroup;
    std::vector<base::UniqueFd> joins;
    bool in_init = false;  // init holds the joins and a standby child already in the leaf ("prepare")
  };
  ExecCgroup make_exec_cgroup();

  EnvironmentSpec environment_;
  std::string id_;
  std::uint32_t host_id_base_ = 0;
  std::uint32_t host_id_count_ = 0;
  std::unique_ptr<DiskClaim> disk_claim_;  // its disk's share of the launcher's DiskBudget; goes after scratch_
  std::unique_ptr<ScratchDir> scratch_;
  std::unique_ptr<Cgroup> cgroup_;
  pid_t init_pid_ = -1;
  int pidfd_ = -1;
  int control_ = -1;
  bool init_alive_ = false;
  bool frozen_ = false;
  bool destroyed_ = false;
  std::vector<base::UniqueFd> listeners_;
  BoxTimes times_;
  std::optional<base::Cause> setup_error_;
  int init_wait_code_ = 0;
  int init_wait_status_ = 0;
  std::uint64_t next_exec_id_ = 1;
  std::map<std::uint64_t, Exec*> execs_;  // live execs by id, for routing init's events
  std::optional<ExecCgroup> prepared_;    // prepare_exec(): the next exec's, still empty
  std::shared_ptr<StartGate> starts_;     // each exec holds a ticket until it ends (start_gate.h)
};

// What init told about one exec, as seen from outside; Exec::finish turns it into a Result.
struct ExecOutcome {
  std::optional<std::int64_t> seccomp_ns;   // command about to load its filter
  std::optional<std::int64_t> exec_ns;      // command's execve succeeded
  std::optional<base::Cause> setup_error;   // init or the command reported a failure
  std::optional<int> exit_code;
  std::optional<int> exit_signal;
  bool box_ended = false;                   // init died first (the box crashed or was destroyed)
  std::int64_t end_ns = 0;
  bool wall_timeout = false;
  bool idle_timeout = false;
  bool cpu_timeout = false;
  bool cancelled = false;
};

// One process tree in a box: its pipes, its cgroup, its deadlines (wall, idle, CPU), cancellation.
// When its first process ends, whatever it started is killed (its cgroup), so nothing it started survives.
class Exec {
 public:
  ~Exec();  // kills what is left of it and removes its cgroup
  Exec(const Exec&) = delete;
  Exec& operator=(const Exec&) = delete;

  std::uint64_t id() const { return id_; }
  std::vector<pollfd> interest() const;
  std::int64_t next_deadline() const;  // CLOCK_MONOTONIC ns at which tick() must run, 0: none
  void handle(int fd, short revents);
  void tick(std::int64_t now_ns);
  void cancel();                       // TERM, grace, KILL of its cgroup, ending as cancelled
  void signal(int signo);              // every process of the exec
  // Interactive input (ProcessSpec::keep_stdin_open or pty): queued and fed as the process reads.
  // Throws SandboxError (step "stdin") once stdin is closed or the exec ended.
  void write_stdin(std::string_view bytes);
  void close_stdin();                  // EOF (on a pty: the terminal's EOF character)
  void resize(std::uint16_t rows, std::uint16_t cols);  // a pty's window size (SIGWINCH); no-op without one
  bool finished() const;
  const ExecOutcome& outcome() const { return outcome_; }
  // Usage of its cgroup, status and output. Call once, after finished(); the cgroup goes with the Exec.
  Result finish();

 private:
  friend class Sandbox;
  Exec(Sandbox& box, std::uint64_t id, const ProcessSpec& spec, RunHooks hooks);
  void ended(bool box_ended);  // its first process exited, or the box's init died: kill what is left
  void started();              // its process exec'd: signals that waited for that are sent
  void read_output(int& fd, bool is_stdout);
  void feed_stdin();
  void close_stdin_fd();
  void start_termination(std::int64_t now);
  void escalate_to_kill();
  Termination termination() const;  // the signals capsule sent and why
  void close_fds();

  Sandbox& box_;
  std::uint64_t id_;
  Limits limits_;
  std::chrono::milliseconds idle_timeout_;
  RunHooks hooks_;
  std::unique_ptr<Cgroup> cgroup_;
  std::unique_ptr<OutputCapture> out_;
  std::unique_ptr<OutputCapture> err_;
  int stdout_read_ = -1;
  int stderr_read_ = -1;
  int stdin_write_ = -1;      // with a pty: the master, also stdout_read_
  bool stdin_is_socket_ = false;
  bool keep_stdin_open_ = false;
  bool pty_ = false;
  std::string stdin_data_;
  std::size_t stdin_offset_ = 0;
  std::uint64_t box_oom_kills_at_start_ = 0;
  StartGate::Ticket starting_;  // from the request to its end: the pool waits meanwhile (50 ms at most)
  std::int64_t start_ns_ = 0;
  std::int64_t sent_ns_ = 0;
  std::int64_t wall_deadline_ = 0;
  std::int64_t idle_deadline_ = 0;
  std::int64_t next_cpu_check_ = 0;
  std::int64_t drain_deadline_ = 0;
  std::optional<std::int64_t> kill_at_ns_;
  bool ended_ = false;
  bool killed_ = false;
  std::int64_t term_sent_ns_ = 0;  // when capsule sent TERM (timeout, cancel), for Result::termination
  std::int64_t kill_sent_ns_ = 0;  // when it escalated to KILL
  std::vector<int> pending_signals_;  // signal() before the process exec'd
  ExecOutcome outcome_;
};

}  // namespace capsule::sandbox

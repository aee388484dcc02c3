// Sandbox::exec and the Exec it returns: pipes and a cgroup for one process tree, the request to init, and
// its supervision (output, stdin, wall / idle / CPU deadlines, TERM-grace-KILL of its cgroup) into a Result.
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sandbox/channel.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/exec_request.h"
#include "sandbox/pipes.h"
#include "sandbox/sandbox.h"

namespace capsule::sandbox {
namespace {

constexpr std::int64_t kMs = 1000000;
constexpr std::int64_t kCpuPollNs = 50 * kMs;
constexpr std::int64_t kCancelPollNs = 50 * kMs;
constexpr std::int64_t kDrainLimitNs = 5000 * kMs;  // after the exec ended, its pipes close within this
// How long after the wall-time deadline init ends a one-shot box by itself (when capsuled is down).
constexpr std::int64_t kWatchdogMarginNs = 1000 * kMs;
constexpr std::size_t kMaxPendingStdin = 16u << 20;  // bytes written to stdin that the process has not read

}  // namespace

// The box's own devpts instance: opened beneath its root without following any link a process of the box may
// have planted, and checked to be the real ptmx of a devpts mount before it is used.
base::UniqueFd Sandbox::open_pty_master(std::uint16_t rows, std::uint16_t cols) const {
  base::UniqueFd root = open_root();
  open_how how{};
  how.flags = O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  base::UniqueFd master(static_cast<int>(syscall(SYS_openat2, root.get(), "dev/pts/ptmx", &how, sizeof how)));
  if (!master) throw_errno("exec", "/dev/pts/ptmx", "open the box's ptmx");
  struct stat st;
  struct statfs fs;
  if (fstat(master.get(), &st) != 0 || fstatfs(master.get(), &fs) != 0 || !S_ISCHR(st.st_mode) ||
      major(st.st_rdev) != 5 || minor(st.st_rdev) != 2 || fs.f_type != DEVPTS_SUPER_MAGIC) {
    throw_error("exec", "/dev/pts/ptmx", "not the box's devpts ptmx");
  }
  int unlock = 0;
  if (ioctl(master.get(), TIOCSPTLCK, &unlock) != 0) throw_errno("exec", "pty", "TIOCSPTLCK");
  winsize size{rows, cols, 0, 0};
  if (ioctl(master.get(), TIOCSWINSZ, &size) != 0) throw_errno("exec", "pty", "TIOCSWINSZ");
  return master;
}

Sandbox::ExecCgroup Sandbox::make_exec_cgroup() {
  ExecCgroup leaf;
  leaf.id = next_exec_id_++;
  leaf.cgroup = cgroup_->create_child("exec-" + std::to_string(leaf.id));
  for (const std::string& file : leaf.cgroup->procs_files()) {
    leaf.joins.emplace_back(open(file.c_str(), O_WRONLY | O_CLOEXEC));
    if (!leaf.joins.back()) throw_errno("exec", file, "open cgroup.procs");
  }
  return leaf;
}

void Sandbox::prepare_exec() {
  if (prepared_ || destroyed_ || !init_alive_ || frozen_ || !cgroup_ || control_ < 0) return;
  try {
    prepared_ = make_exec_cgroup();
  } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): exec() makes it again and reports why
    return;
  }
  // init forks the exec's child now and it joins the leaf now; init keeps the descriptors. Never blocking: an
  // init not reading leaves the leaf unprepared in init, and exec() sends the descriptors again.
  ExecRequest prepare;
  prepare.op = init_op::kPrepare;
  prepare.id = prepared_->id;
  prepare.cgroup_fds = prepared_->joins.size();
  try {
    send_message(control_, encode_exec_request(prepare), false);
  } catch (const SandboxError&) {
    return;
  }
  try {
    for (const auto& fd : prepared_->joins) send_fd(control_, fd.get(), false);
  } catch (const SandboxError&) {
    kill_init();  // a request cut short leaves init waiting for descriptors, as in exec()
    return;
  }
  prepared_->in_init = true;
  prepared_->joins.clear();
}

std::unique_ptr<Exec> Sandbox::exec(const ProcessSpec& spec, RunHooks hooks) {
  if (destroyed_ || !init_alive_ || control_ < 0) throw_error("exec", "", "the sandbox has ended");
  if (frozen_) throw_error("exec", "", "the sandbox is frozen");
  const std::int64_t start = monotonic_ns();
  validate_process(spec, host_id_count_);
  ExecCgroup leaf = prepared_ ? std::move(*prepared_) : make_exec_cgroup();
  prepared_.reset();
  const std::uint64_t id = leaf.id;
  std::unique_ptr<Exec> exec(new Exec(*this, id, spec, std::move(hooks)));
  if (starts_) exec->starting_ = starts_->enter();
  exec->start_ns_ = start;
  exec->cgroup_ = std::move(leaf.cgroup);
  std::vector<base::UniqueFd> joins = std::move(leaf.joins);  // none when init holds them (in_init)
  // stdin, stdout, stderr as init's child gets them; with a pty all three are its slave.
  base::UniqueFd child_stdio[3];
  if (spec.pty) {
    base::UniqueFd master = open_pty_master(spec.rows, spec.cols);
    for (auto& end : child_stdio) end.reset(static_cast<int>(ioctl(master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)));
    if (!child_stdio[0] || !child_stdio[1] || !child_stdio[2]) throw_errno("exec", "pty", "TIOCGPTPEER");
    exec->pty_ = true;
    exec->stdout_read_ = master.get();
    exec->stdin_write_ = master.release();
  } else {
    const bool feeds = spec.stdin_data.has_value() || spec.keep_stdin_open;
    Pipe in = make_stdin(feeds);
    Pipe out = make_pipe();
    Pipe err = make_pipe();
    if (!feeds) in.write_end.reset();
    child_stdio[0] = std::move(in.read_end);
    child_stdio[1] = std::move(out.write_end);
    child_stdio[2] = std::move(err.write_end);
    exec->stdout_read_ = out.read_end.release();
    exec->stderr_read_ = err.read_end.release();
    exec->stdin_write_ = in.write_end.release();
    exec->stdin_is_socket_ = feeds;
  }
  exec->keep_stdin_open_ = spec.keep_stdin_open;

  ExecRequest request;
  request.id = id;
  request.argv = spec.argv;
  request.env = spec.env;
  request.cwd = spec.cwd;
  request.uid = spec.uid;
  request.gid = spec.gid;
  request.nofile = spec.limits.nofile;
  request.fsize_bytes = spec.limits.fsize_bytes;
  request.stack_bytes = spec.limits.stack_bytes;
  request.cgroup_fds = joins.size();
  request.prepared = leaf.in_init;
  request.controlling_tty = spec.pty;
  request.ends_sandbox = !environment_.session;
  if (request.ends_sandbox && spec.limits.wall_time.count() > 0) {
    // After the launcher's own deadline, so that while capsuled runs it is the one that ends it.
    request.watchdog_ns = start + spec.limits.wall_time.count() * kMs + kWatchdogMarginNs;
    request.kill_grace_ms = spec.limits.kill_grace.count();
  }
  // Never blocking: an init that stopped reading (something in the box stopped it) must not stall the caller's
  // thread. A request cut short leaves init waiting for descriptors, so the box is ended then.
  try {
    send_message(control_, encode_exec_request(request), false);
  } catch (const SandboxError&) {
    throw_error("exec", "", "the sandbox's init is not taking requests");
  }
  try {
    for (const auto& fd : child_stdio) send_fd(control_, fd.get(), false);
    for (const auto& fd : joins) send_fd(control_, fd.get(), false);
  } catch (const SandboxError&) {
    kill_init();
    throw_error("exec", "", "the sandbox's init stopped taking requests; the sandbox is ended");
  }
  exec->sent_ns_ = monotonic_ns();
  if (exec->stdin_write_ >= 0) exec->feed_stdin();
  execs_[id] = exec.get();
  return exec;
}

Exec::Exec(Sandbox& box, std::uint64_t id, const ProcessSpec& spec, RunHooks hooks)
    : box_(box), id_(id), limits_(spec.limits), idle_timeout_(spec.idle_timeout), hooks_(std::move(hooks)),
      out_(std::make_unique<OutputCapture>(spec.limits.output_cap_bytes, spec.stdout_spill_path)),
      err_(std::make_unique<OutputCapture>(spec.limits.output_cap_bytes, spec.stderr_spill_path)),
      stdin_data_(spec.stdin_data.value_or("")) {
  const std::int64_t now = monotonic_ns();
  if (limits_.wall_time.count() > 0) wall_deadline_ = now + static_cast<std::int64_t>(limits_.wall_time.count()) * kMs;
  if (idle_timeout_.count() > 0) idle_deadline_ = now + static_cast<std::int64_t>(idle_timeout_.count()) * kMs;
  if (limits_.cpu_time.count() > 0) next_cpu_check_ = now + kCpuPollNs;
  try {
    box_oom_kills_at_start_ = box_.oom_kills();
  } catch (const SandboxError&) {
    box_oom_kills_at_start_ = 0;
  }
}

Exec::~Exec() {
  close_fds();
  box_.execs_.erase(id_);
  if (cgroup_) {
    try {
      cgroup_->remove();
    } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): the box's removal retries the subtree
    }
  }
}

void Exec::ended(bool box_ended) {
  if (ended_) return;
  ended_ = true;
  starting_.release();
  outcome_.box_ended = box_ended && !outcome_.exit_code && !outcome_.exit_signal;
  outcome_.end_ns = monotonic_ns();
  kill_at_ns_.reset();
  next_cpu_check_ = 0;
  drain_deadline_ = outcome_.end_ns + kDrainLimitNs;
  // Nothing it started may outlive it: what is left in its cgroup goes now, so its pipes close. Not needed when
  // init of a one-shot box reported the end of a command that ran: it killed and reaped everything in the box
  // (its pid namespace) before saying so, and exits next (a walk over five v1 hierarchies saved per run).
  const bool init_emptied_the_box = !box_.environment().session && !outcome_.box_ended && outcome_.exec_ns &&
                                    (outcome_.exit_code || outcome_.exit_signal);
  try {
    if (cgroup_ && !init_emptied_the_box) cgroup_->kill_all();
  } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): the drain deadline still ends the wait
  }
}

void Exec::start_termination(std::int64_t now) {
  if (kill_at_ns_ || killed_ || ended_) return;
  signal(SIGTERM);  // a process not yet exec'd gets it once it has, instead of only the KILL after the grace
  term_sent_ns_ = now;
  kill_at_ns_ = now + static_cast<std::int64_t>(limits_.kill_grace.count()) * kMs;
}

// Its cgroup is killed, and again at each tick until init reports the end: a request init had not yet
// served when the kill came starts its process later. A one-shot box goes with it (its init too, in case
// the box never got as far as serving).
void Exec::escalate_to_kill() {
  if (!killed_) kill_sent_ns_ = monotonic_ns();
  killed_ = true;
  kill_at_ns_.reset();
  if (!box_.environment().session) box_.kill_init();
  try {
    cgroup_->kill_all();
  } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): retried at the next tick
  }
}

// Before its process has exec'd it may not have joined its cgroup yet: the signal waits for the "exec" event.
void Exec::signal(int signo) {
  if (ended_) return;
  if (!outcome_.exec_ns && !outcome_.setup_error) {
    pending_signals_.push_back(signo);
    return;
  }
  cgroup_->signal_all(signo);
}

void Exec::started() {
  for (int signo : pending_signals_) cgroup_->signal_all(signo);
  pending_signals_.clear();
}

void Exec::cancel() {
  if (ended_ || outcome_.cancelled) return;
  outcome_.cancelled = true;
  start_termination(monotonic_ns());
}

void Exec::feed_stdin() {
  while (stdin_offset_ < stdin_data_.size()) {
    const char* data = stdin_data_.data() + stdin_offset_;
    const std::size_t size = stdin_data_.size() - stdin_offset_;
    // A socket never raises SIGPIPE with MSG_NOSIGNAL; a pty master never raises it at all.
    ssize_t sent = stdin_is_socket_ ? send(stdin_write_, data, size, MSG_NOSIGNAL | MSG_DONTWAIT)
                                    : write(stdin_write_, data, size);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      stdin_data_.clear();  // the command closed stdin: the rest is dropped
      stdin_offset_ = 0;
      if (!pty_) close_stdin_fd();
      return;
    }
    stdin_offset_ += static_cast<std::size_t>(sent);
  }
  stdin_data_.clear();
  stdin_offset_ = 0;
  if (!keep_stdin_open_ && !pty_) close_stdin_fd();
}

void Exec::close_stdin_fd() {
  if (stdin_write_ >= 0 && stdin_write_ != stdout_read_) close(stdin_write_);
  stdin_write_ = -1;
}

void Exec::write_stdin(std::string_view bytes) {
  if (stdin_write_ < 0 || ended_ || (!keep_stdin_open_ && !pty_)) throw_error("stdin", "", "stdin is closed");
  if (stdin_data_.size() - stdin_offset_ + bytes.size() > kMaxPendingStdin) {
    throw_error("stdin", "", "more than " + std::to_string(kMaxPendingStdin) + " bytes wait to be read");
  }
  stdin_data_.erase(0, stdin_offset_);
  stdin_offset_ = 0;
  stdin_data_.append(bytes);
  feed_stdin();
}

void Exec::close_stdin() {
  if (pty_) {
    if (stdin_write_ >= 0 && !ended_) write_stdin("\x04");  // the terminal's EOF character (VEOF)
    return;
  }
  keep_stdin_open_ = false;
  if (stdin_write_ >= 0 && stdin_offset_ >= stdin_data_.size()) close_stdin_fd();
}

void Exec::resize(std::uint16_t rows, std::uint16_t cols) {
  if (!pty_ || stdout_read_ < 0) return;
  winsize size{rows, cols, 0, 0};
  ioctl(stdout_read_, TIOCSWINSZ, &size);  // the kernel sends SIGWINCH to the foreground group
}

bool Exec::finished() const { return ended_ && stdout_read_ < 0 && stderr_read_ < 0; }

std::vector<pollfd> Exec::interest() const {
  std::vector<pollfd> wanted;
  for (int fd : {stdout_read_, stderr_read_}) {
    if (fd >= 0) wanted.push_back({fd, POLLIN, 0});
  }
  if (stdin_write_ >= 0 && stdin_offset_ < stdin_data_.size()) wanted.push_back({stdin_write_, POLLOUT, 0});
  return wanted;
}

std::int64_t Exec::next_deadline() const {
  if (ended_) return finished() ? 0 : drain_deadline_;
  std::int64_t wake = 0;
  auto consider = [&](std::int64_t t) {
    if (t > 0 && (wake == 0 || t < wake)) wake = t;
  };
  const bool ending = outcome_.wall_timeout || outcome_.idle_timeout || outcome_.cpu_timeout || outcome_.cancelled;
  if (!ending) consider(wall_deadline_);
  if (!ending) consider(idle_deadline_);
  if (kill_at_ns_) consider(*kill_at_ns_);
  if (killed_) consider(monotonic_ns() + kCancelPollNs);
  consider(next_cpu_check_);
  if (hooks_.cancel != nullptr && !outcome_.cancelled) consider(monotonic_ns() + kCancelPollNs);
  return wake;
}

void Exec::tick(std::int64_t now) {
  if (ended_) {
    if (now >= drain_deadline_) close_fds();  // a pipe held open by something outside: stop waiting
    return;
  }
  if (hooks_.cancel != nullptr && hooks_.cancel->load()) cancel();
  const bool ending = outcome_.wall_timeout || outcome_.idle_timeout || outcome_.cpu_timeout || outcome_.cancelled;
  if (!ending && wall_deadline_ != 0 && now >= wall_deadline_) {
    outcome_.wall_timeout = true;
    start_termination(now);
  } else if (!ending && idle_deadline_ != 0 && now >= idle_deadline_) {
    outcome_.idle_timeout = true;
    start_termination(now);
  }
  if (next_cpu_check_ != 0 && now >= next_cpu_check_) {
    next_cpu_check_ = now + kCpuPollNs;
    const CgroupUsage usage = cgroup_->usage();
    const auto cpu_limit_ns = static_cast<std::int64_t>(limits_.cpu_time.count()) * kMs;
    const bool still_ending =
        outcome_.wall_timeout || outcome_.idle_timeout || outcome_.cpu_timeout || outcome_.cancelled;
    if (static_cast<std::int64_t>(usage.cpu_user_ns + usage.cpu_sys_ns) >= cpu_limit_ns && !still_ending) {
      outcome_.cpu_timeout = true;
      start_termination(now);
    }
  }
  if ((kill_at_ns_ && now >= *kill_at_ns_) || killed_) escalate_to_kill();
}

void Exec::handle(int fd, short revents) {
  if (revents == 0 || fd < 0) return;
  // With a pty one descriptor is both stdin (POLLOUT) and stdout (POLLIN, POLLHUP once the slave is gone).
  const short gone = POLLERR | POLLHUP | POLLNVAL;
  if (fd == stdin_write_ && (revents & (POLLOUT | (pty_ ? 0 : gone))) != 0) feed_stdin();
  if (fd == stdout_read_ && (revents & (POLLIN | gone)) != 0) {
    read_output(stdout_read_, true);
  } else if (fd == stderr_read_ && (revents & (POLLIN | gone)) != 0) {
    read_output(stderr_read_, false);
  }
}

void Exec::read_output(int& fd, bool is_stdout) {
  char buffer[65536];
  ssize_t got = read(fd, buffer, sizeof buffer);
  if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (got <= 0) {  // EOF, or EIO from a pty master whose slave is closed everywhere
    if (pty_ && fd == stdin_write_) stdin_write_ = -1;
    close(fd);
    fd = -1;
    return;
  }
  if (idle_deadline_ != 0 && !ended_) {
    idle_deadline_ = monotonic_ns() + static_cast<std::int64_t>(idle_timeout_.count()) * kMs;
  }
  std::string_view chunk(buffer, static_cast<std::size_t>(got));
  (is_stdout ? out_ : err_)->append(chunk);
  if (hooks_.on_output) hooks_.on_output(is_stdout ? OutputStream::kStdout : OutputStream::kStderr, chunk);
}

void Exec::close_fds() {
  close_stdin_fd();
  for (int* fd : {&stdout_read_, &stderr_read_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

namespace {

Status classify(const ExecOutcome& outcome, std::uint64_t oom_kills, const Limits& limits,
                std::chrono::milliseconds idle_timeout, std::string* reason) {
  if (outcome.cancelled) {
    *reason = "cancelled";
    return Status::kCancelled;
  }
  if (outcome.wall_timeout) {
    *reason = "wall time limit of " + std::to_string(limits.wall_time.count()) + " ms exceeded";
    return Status::kTimedOut;
  }
  if (outcome.idle_timeout) {
    *reason = "no output for " + std::to_string(idle_timeout.count()) + " ms (idle timeout)";
    return Status::kIdleTimedOut;
  }
  if (outcome.cpu_timeout) {
    *reason = "cpu time limit of " + std::to_string(limits.cpu_time.count()) + " ms exceeded";
    return Status::kTimedOut;
  }
  if (outcome.setup_error) {
    *reason = outcome.setup_error->describe();
    return Status::kSetupFailed;
  }
  if (oom_kills > 0 && (!outcome.exit_code || *outcome.exit_code != 0)) {
    *reason = "memory limit of " + std::to_string(limits.memory_bytes) + " bytes exceeded (OOM kill)";
    return Status::kOomKilled;
  }
  if (outcome.exit_signal) {
    *reason = std::string("killed by signal ") + strsignal(*outcome.exit_signal);
    return Status::kSignaled;
  }
  if (outcome.exit_code) {
    *reason = *outcome.exit_code == 0 ? "" : "exited with code " + std::to_string(*outcome.exit_code);
    return *outcome.exit_code == 0 ? Status::kSucceeded : Status::kFailed;
  }
  *reason = "the sandbox ended before the command did";
  return Status::kInternalError;
}

}  // namespace

Termination Exec::termination() const {
  Termination out;
  if (term_sent_ns_ == 0 && kill_sent_ns_ == 0) return out;
  if (outcome_.cancelled) out.reason = "cancelled";
  else if (outcome_.wall_timeout) out.reason = "wall_time";
  else if (outcome_.idle_timeout) out.reason = "idle_timeout";
  else if (outcome_.cpu_timeout) out.reason = "cpu_time";
  out.kill_sent = kill_sent_ns_ != 0;
  if (out.kill_sent) out.kill_after_ms = ms_between(term_sent_ns_, kill_sent_ns_);
  return out;
}

Result Exec::finish() {
  Result result;
  CgroupUsage usage;
  std::uint64_t box_oom_kills = box_oom_kills_at_start_;
  try {
    usage = cgroup_->usage();
    box_oom_kills = box_.oom_kills();
  } catch (const SandboxError&) {  // NOLINT(bugprone-empty-catch): a box already destroyed has no usage
  }
  const std::uint64_t oom_kills = exec_oom_kills(usage.oom_kills, box_oom_kills, box_oom_kills_at_start_);
  Limits limits = limits_;
  limits.memory_bytes = box_.environment().limits.memory_bytes;
  result.status = classify(outcome_, oom_kills, limits, idle_timeout_, &result.reason);
  if (outcome_.exit_code) result.exit_code = *outcome_.exit_code;
  if (outcome_.exit_signal) {
    result.signal = *outcome_.exit_signal;
  } else if (kill_sent_ns_ != 0 && !outcome_.exit_code) {
    // A one-shot box's init went with the KILL, so no wait status came: every process of its pid namespace
    // died of SIGKILL.
    result.signal = SIGKILL;
  }
  result.termination = termination();
  if (outcome_.setup_error && outcome_.setup_error->step == "exec") result.exit_code = 127;
  result.wall_ms = ms_between(start_ns_, outcome_.end_ns);
  result.cpu_user_ms = static_cast<double>(usage.cpu_user_ns) / 1e6;
  result.cpu_sys_ms = static_cast<double>(usage.cpu_sys_ns) / 1e6;
  result.peak_memory_bytes = usage.peak_memory_bytes;
  result.oom_kills = oom_kills;
  result.stdout_capture = out_->finish();
  result.stderr_capture = err_->finish();
  result.setup.prepare_ms = ms_between(start_ns_, sent_ns_);
  if (outcome_.seccomp_ns && outcome_.exec_ns) result.setup.exec_ms = ms_between(*outcome_.seccomp_ns, *outcome_.exec_ns);
  if (outcome_.exec_ns) result.setup.total_ms = ms_between(start_ns_, *outcome_.exec_ns);
  // Its cgroup, already emptied when its first process ended, is removed with the Exec, after the answer.
  return result;
}

}  // namespace capsule::sandbox

// A session's execs: accepted (a ledger row, a process spec from the session's and the request's), started on
// the loop thread with their output into the LogStore and to listeners, signalled, and recorded when they end.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/base64.h"
#include "daemon/record/run_record.h"
#include "daemon/sessions/session_manager.h"
#include "daemon/sessions/session_state.h"
#include "daemon/sessions/shell_state.h"
#include "http/response.h"
#include "images/image_user.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/result_json.h"
#include "sandbox/scratch.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;

template <typename Duration>
Duration clamp_to(Duration value, Duration maximum) {
  return maximum.count() > 0 ? std::min(value, maximum) : value;
}

// Each running exec holds pipes, log files and a cgroup in the daemon: a session may have this many at once.
constexpr std::size_t kMaxRunningExecs = 64;

// An exec's "user" against the session's image (its /etc/passwd and /etc/group), as a run's image user is.
images::ImageUser resolve_exec_user(const std::string& user, const std::vector<std::string>& layers) {
  try {
    return images::resolve_image_user(user, layers);
  } catch (const base::Error& e) {
    throw http::ApiError("invalid_spec", std::string("user: ") + e.what());
  }
}

// Whether an exec's record reads the session's workspace: its collect globs, or the session's protect globs
// against a copy-on-write workspace's diff (files created under them, daemon/record/protect_diff.h).
bool record_reads_workspace(const spec::ExecSpec& exec, const spec::SessionSpec& session) {
  return exec.collects() || (!session.protect.empty() && session.environment.cow_workspace());
}

}  // namespace

std::string SessionManager::exec(const std::string& id, const spec::ExecSpec& spec, const Peer& peer,
                                 Listener listener, std::shared_ptr<const json> baseline_run) {
  auto run = std::make_shared<ExecRun>();
  run->id = sandbox::new_sandbox_id();
  run->spec = spec;
  run->baseline_run = std::move(baseline_run);
  // The user is looked up in the image's passwd and group files before the lock: that reads files, and every
  // session waits on the lock.
  std::optional<images::ImageUser> user;
  if (spec.user) {
    std::vector<std::string> layers;
    {
      std::lock_guard lock(mutex_);
      layers = live_session_locked(id)->environment.rootfs_layers;
    }
    user = resolve_exec_user(*spec.user, layers);
  }
  std::lock_guard lock(mutex_);
  run->session = live_session_locked(id);
  Session& session = *run->session;
  switch (session.phase) {
    case Phase::kReady: break;
    case Phase::kFrozen:
      throw http::ApiError("session_frozen", "session " + id + " is frozen (" + session.row.ended_reason + ")");
    case Phase::kStarting: throw http::ApiError("conflict", "session " + id + " is being reset; retry");
    case Phase::kEnding:
    case Phase::kEnded: throw http::ApiError("session_ended", "session " + id + " has ended");
  }
  if (session.execs_running >= kMaxRunningExecs) {
    throw http::ApiError("queue_full", "session " + id + " has " + std::to_string(session.execs_running) +
                                           " execs running, the most it may; wait for one to end");
  }
  sandbox::ProcessSpec& process = run->process;
  process = session.process;
  process.argv = spec.script && session.spec.persist_shell_state ? shell_state_command(*spec.script, spec.env, spec.cwd)
                                                                 : spec.command();
  for (const auto& [key, value] : spec.env) {
    std::erase_if(process.env, [&](const std::string& entry) { return entry.rfind(key + "=", 0) == 0; });
    process.env.push_back(key + "=" + value);
  }
  if (spec.cwd) process.cwd = *spec.cwd;
  if (user) {
    process.uid = user->uid;
    process.gid = user->gid;
  }
  process.stdin_data = spec.stdin_data;
  process.keep_stdin_open = spec.stdin_open || spec.pty;
  process.pty = spec.pty;
  process.rows = spec.rows;
  process.cols = spec.cols;
  const spec::Limits& maxima = options_.limits.maxima;
  if (spec.timeout.count() > 0) process.limits.wall_time = clamp_to(spec.timeout, maxima.wall_time);
  if (spec.cpu_time.count() > 0) process.limits.cpu_time = clamp_to(spec.cpu_time, maxima.cpu_time);
  if (spec.kill_grace.count() > 0) process.limits.kill_grace = clamp_to(spec.kill_grace, maxima.kill_grace);
  if (spec.output_cap > 0) {
    process.limits.output_cap_bytes =
        maxima.output_cap_bytes > 0 ? std::min(spec.output_cap, maxima.output_cap_bytes) : spec.output_cap;
  }
  process.idle_timeout = spec.idle_timeout;

  json stored = spec::to_json(spec);
  stored["session"] = id;
  stored["network"] = session.network;  // what it runs with: set_network switches only while no exec is accepted
  run->row = queued_row(run->id, stored, session.row.pinned, spec.labels, peer.uid, peer.pid, unix_ms());
  ledger_.insert_queued(run->row, id);
  ++session.execs_total;
  ++session.execs_running;
  session.row.last_used_ms = unix_ms();
  if (listener) {
    run->listeners.push_back(std::move(listener));
    run->listeners.back()({{"event", "queued"}, {"id", run->id}});
  }
  tasks_.push_back([this, run] { start_exec(run); });
  wake();
  return run->id;
}

void SessionManager::signal_exec(const std::string& id, const std::string& exec_id, int signo) {
  act_on_exec(id, exec_id, [signo](sandbox::Exec& exec) { exec.signal(signo); });
}

void SessionManager::write_exec_stdin(const std::string& id, const std::string& exec_id, const std::string& bytes,
                                      bool close) {
  act_on_exec(id, exec_id, [&](sandbox::Exec& exec) {
    try {
      if (!bytes.empty()) exec.write_stdin(bytes);
      if (close) exec.close_stdin();
    } catch (const sandbox::SandboxError& e) {
      throw http::ApiError("conflict", "exec " + exec_id + ": " + e.cause().detail);
    }
  });
}

void SessionManager::resize_exec(const std::string& id, const std::string& exec_id, std::uint16_t rows,
                                 std::uint16_t cols) {
  act_on_exec(id, exec_id, [&](sandbox::Exec& exec) { exec.resize(rows, cols); });
}

void SessionManager::cancel_exec(const std::string& id, const std::string& exec_id) {
  act_on_exec(id, exec_id, [](sandbox::Exec& exec) { exec.cancel(); });
}

void SessionManager::act_on_exec(const std::string& id, const std::string& exec_id,
                                 const std::function<void(sandbox::Exec&)>& action) {
  bool done = false;
  on_loop([&] {
    std::shared_ptr<Session> session;
    {
      std::lock_guard lock(mutex_);
      auto it = live_.find(id);
      if (it != live_.end()) session = it->second;
    }
    if (!session) return;
    auto found = session->running.find(exec_id);
    if (found == session->running.end() || !found->second->exec) return;
    action(*found->second->exec);
    done = true;
  });
  if (done) return;
  std::optional<RunRow> row = ledger_.get(exec_id);
  if (row && row->spec.value("session", "") == id) {
    throw http::ApiError("already_finished", "exec " + exec_id + " is " + row->state);
  }
  throw http::ApiError("not_found", "session " + id + " has no exec " + exec_id);
}

void SessionManager::notify(const std::shared_ptr<ExecRun>& run, const json& event) {
  std::vector<Listener> listeners;
  {
    std::lock_guard lock(mutex_);
    listeners = run->listeners;
  }
  for (const auto& listener : listeners) listener(event);
}

void SessionManager::start_exec(const std::shared_ptr<ExecRun>& run) {
  Session& session = *run->session;
  bool ready;
  {
    std::lock_guard lock(mutex_);
    ready = session.phase == Phase::kReady && session.box;
  }
  if (ready && session.held > 0) {  // frozen for a checkpoint: it starts once the box is let go
    session.waiting.push_back(run);
    return;
  }
  if (!ready) {
    sandbox::Result result;
    result.status = sandbox::Status::kCancelled;
    result.reason = "the session ended before the exec started";
    return finish_exec(run, result);
  }
  try {
    run->stdout_log = logs_.open_writer(run->id, Stream::kStdout);
    run->stderr_log = logs_.open_writer(run->id, Stream::kStderr);
    sandbox::RunHooks hooks;
    ExecRun* raw = run.get();
    hooks.on_output = [this, raw](sandbox::OutputStream stream, std::string_view chunk) {
      const bool is_stdout = stream == sandbox::OutputStream::kStdout;
      (is_stdout ? raw->stdout_log : raw->stderr_log)->append(chunk);
      std::vector<Listener> listeners;
      {
        std::lock_guard lock(mutex_);
        listeners = raw->listeners;
      }
      if (listeners.empty()) return;
      const json event = {{"event", is_stdout ? "stdout" : "stderr"}, {"id", raw->id},
                          {"data_b64", base::base64_encode(chunk)}};
      for (const auto& listener : listeners) listener(event);
    };
    {
      std::lock_guard lock(mutex_);
      run->proxy = session.proxy;
    }
    if (run->proxy) run->proxy_served_before = run->proxy->served_count();
    tidy_spent_execs(session);  // the next exec's cgroup and standby child are made there
    run->exec = session.box->exec(run->process, hooks);
    session.running[run->id] = run;
    session.last_used_ns = sandbox::monotonic_ns();
    // Once it can be signalled; its output reaches listeners only after this (the hooks run on this thread).
    // The row is written by the finisher, off this thread (and before the end's, see record_exec_start).
    run->started_ms = unix_ms();
    finisher_.post([this, run] { record_exec_start(*run); });
    notify(run, {{"event", "started"}, {"id", run->id}});
  } catch (const sandbox::SandboxError& e) {
    finish_exec(run, sandbox::Launcher::setup_failure(e));
  } catch (const std::exception& e) {
    sandbox::Result result;
    result.status = sandbox::Status::kInternalError;
    result.reason = std::string("starting the exec failed: ") + e.what();
    finish_exec(run, result);
  }
}

void SessionManager::finish_exec(const std::shared_ptr<ExecRun>& run, sandbox::Result result) {
  Session& session = *run->session;
  if (result.status == sandbox::Status::kCancelled && !run->ended_by.empty()) result.reason = "cancelled: " + run->ended_by;
  // One that ran to its end is tidied later; one whose start or supervision failed goes now, with whatever
  // it left running.
  if (run->exec && run->exec->finished()) session.spent.push_back(std::move(run->exec));
  run->exec.reset();
  session.running.erase(run->id);
  session.last_used_ns = sandbox::monotonic_ns();
  hold_box_for_record(*run);
  post_exec_record(run, std::move(result));
}

void SessionManager::hold_box_for_record(ExecRun& run) {
  Session& session = *run.session;
  if (!record_reads_workspace(run.spec, session.spec)) return;
  {
    std::lock_guard lock(mutex_);
    if (session.phase != Phase::kReady && session.phase != Phase::kFrozen) return;
  }
  if (!session.box || session.box->ended()) return;
  const SessionBox view = box_view(session);
  run.record_upper = view.workspace_upper;
  // A non-root caller's directory is read only through the descriptor opened as that caller: its /proc/self/fd
  // path, with "/." so that the diff's no-follow open applies to "." and not to that link.
  run.record_lower = view.workspace_lower      ? view.workspace_lower->proc_path() + "/."
                     : view.workspace_layers.empty() ? ""
                                                      : view.workspace_layers.back();
  ++session.held;  // the next exec starts once the record has read the reports this one left
  run.holds_box = true;
}

void SessionManager::release_record_hold(const std::shared_ptr<ExecRun>& run) {
  if (!run->holds_box) return;
  run->holds_box = false;
  std::lock_guard lock(mutex_);
  tasks_.push_back([this, session = run->session] { release_box(session); });
  wake();
}

void SessionManager::tidy_spent_execs(Session& session) {
  if (session.spent.empty()) return;
  session.spent.clear();  // their cgroups go (on this thread, before the box can)
  if (session.box && !session.box->ended()) {
    try {
      const sandbox::CgroupUsage usage = session.box->usage();
      std::lock_guard lock(mutex_);
      session.usage = usage;
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): the last usage read stays
    }
    session.box->prepare_exec();
  }
}

void SessionManager::record_exec_start(ExecRun& run) {
  std::lock_guard lock(run.start_recording);
  if (run.start_recorded) return;
  run.start_recorded = true;
  try {
    ledger_.mark_running(run.id, run.started_ms);
    run.row.state = "running";
    run.row.started_ms = run.started_ms;
  } catch (const std::exception& e) {
    spdlog::error("exec {}: recording it as running failed: {}", run.id, e.what());
  }
}

void SessionManager::post_exec_record(const std::shared_ptr<ExecRun>& run, sandbox::Result result) {
  finisher_.post([this, run, result = std::move(result)] {
    if (run->started_ms != 0) record_exec_start(*run);
    std::string state = sandbox::status_name(result.status);
    json record;
    try {
      for (auto* log : {run->stdout_log.get(), run->stderr_log.get()}) {
        if (log != nullptr) log->close();
      }
      spec::RunSpec as_run = run->session->spec.environment;
      as_run.argv = run->process.argv;
      as_run.labels = run->spec.labels;
      spec::apply_collect(run->spec, as_run);
      // The session's protect globs are checked against its workspace diff (since its start) after every exec.
      as_run.protect = run->session->spec.protect;
      RecordSources sources;
      sources.baseline_run = run->baseline_run;
      if (run->proxy) sources.proxy = run->proxy->record(run->proxy_served_before);
      run->proxy.reset();
      if (run->stdout_log) sources.stdout_digest = run->stdout_log->digest();
      if (run->stderr_log) sources.stderr_digest = run->stderr_log->digest();
      // Collectors read the workspace only while the box is held: a cow workspace's upper is on the box's disk.
      if (run->holds_box) {
        sources.upper_dir = run->record_upper;
        sources.lower_dir = run->record_lower;
      } else {
        as_run.junit_globs.clear();
        as_run.classfile_globs.clear();
        as_run.coverage_globs.clear();
      }
      record = build_record(as_run, result, sources);
      if (!run->holds_box && run->spec.collects()) {
        record["collect_error"] = "the session's box ended before the exec's reports could be read";
      }
    } catch (const std::exception& e) {
      state = "internal_error";
      record = failure_record(std::string("finishing the exec failed: ") + e.what(), result);
    }
    release_record_hold(run);
    RunRow& row = run->row;  // its started_ms set by record_exec_start once that row landed
    row.state = state;
    row.finished_ms = unix_ms();
    try {
      ledger_.mark_finished(run->id, state, record, *row.finished_ms);
    } catch (const std::exception& e) {
      spdlog::error("exec {}: recording it as {} failed: {}", run->id, state, e.what());
      record["record_error"] = std::string("the ledger did not record this end: ") + e.what();
    }
    row.outcome = std::move(record);
    json run_json = row.to_json();
    {
      std::lock_guard lock(mutex_);
      --run->session->execs_running;
      run->session->row.last_used_ms = unix_ms();
    }
    try {
      notify(run, {{"event", "finished"}, {"id", run->id}, {"run", std::move(run_json)}});
    } catch (const std::exception& e) {
      spdlog::error("exec {}: sending \"finished\" failed: {}", run->id, e.what());
    }
    changed_.notify_all();
    {  // now that the answer is on its way
      std::lock_guard lock(mutex_);
      tasks_.push_back([this, session = run->session] { tidy_spent_execs(*session); });
    }
    wake();  // an idle_ttl may start now
  });
}

}  // namespace capsule::daemon

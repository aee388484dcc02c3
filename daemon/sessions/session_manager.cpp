// Sessions: create (resolved as a run's environment, session=true) -> execs (one poll loop over every box and
// exec, each exec a ledger row with logs) -> end (delete, ttl / idle_ttl expiry, a crashed box, shutdown).
#include "daemon/sessions/session_manager.h"

#include "base/thread_name.h"
#include "daemon/sessions/session_checkpoints.h"
#include "daemon/sessions/session_state.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "daemon/record/run_record.h"
#include "http/response.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/result_json.h"
#include "sandbox/scratch.h"

namespace capsule::daemon {
namespace {

using nlohmann::json;
constexpr std::int64_t kMs = 1000000;
constexpr std::int64_t kStartLimitNs = 60000 * kMs;  // a box not serving execs by then has failed

}  // namespace

SessionManager::SessionManager(sandbox::Launcher& launcher, Ledger& ledger, LogStore& logs,
                               SessionManagerOptions options)
    : launcher_(launcher), ledger_(ledger), logs_(logs), options_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  std::filesystem::create_directories(options_.sessions_dir);
  thread_ = std::thread([this] {
    base::name_this_thread("sessions");
    loop();
  });
}

SessionManager::~SessionManager() {
  stop();
  close(wake_fd_);
}

void SessionManager::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, session] : live_) {
      tasks_.push_back([this, session] { begin_end(session, "lost", "capsuled stopped"); });
    }
  }
  wake();
  thread_.join();
  finisher_.stop();
}

void SessionManager::wake() {
  std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

void SessionManager::on_loop(std::function<void()> task) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw http::ApiError("draining", "capsuled is shutting down");
    tasks_.push_back([task = std::move(task), done] {
      try {
        task();
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
  }
  wake();
  finished.get();
}

std::shared_ptr<SessionManager::Session> SessionManager::live_session_locked(const std::string& id) const {
  auto it = live_.find(id);
  if (it != live_.end()) return it->second;
  if (ledger_.get_session(id)) throw http::ApiError("session_ended", "session " + id + " has ended");
  throw http::ApiError("not_found", "no session with id " + id);
}

json SessionManager::session_json_locked(const Session& session) const {
  const SessionRow& row = session.row;
  return {{"id", row.id},
          {"state", row.state},
          {"labels", row.labels},
          {"peer", {{"uid", row.peer_uid}, {"pid", row.peer_pid}}},
          {"times", {{"created", row.created_ms}, {"last_used", row.last_used_ms},
                     {"ended", row.ended_ms ? json(*row.ended_ms) : json(nullptr)}}},
          {"spec", row.spec},
          {"pinned", row.pinned},
          {"checkpoints", list_checkpoints(session.dir)},
          {"execs", {{"total", session.execs_total}, {"running", session.execs_running}}},
          {"usage", {{"cpu_ms", (session.usage.cpu_user_ns + session.usage.cpu_sys_ns) / 1000000},
                     {"peak_memory_bytes", session.usage.peak_memory_bytes}}},
          // The count only: the objects are in each exec's record, and this is built under the manager's lock.
          {"proxy", session.proxy ? json{{"served_count", session.proxy->served_count()}} : json(nullptr)},
          {"network", session.network},
          {"ended_reason", row.ended_reason.empty() ? json(nullptr) : json(row.ended_reason)}};
}

std::optional<json> SessionManager::get(const std::string& id) const {
  {
    std::lock_guard lock(mutex_);
    if (auto it = live_.find(id); it != live_.end()) return session_json_locked(*it->second);
  }
  std::optional<SessionRow> row = ledger_.get_session(id);
  if (!row) return std::nullopt;
  Session recorded;
  recorded.row = *row;
  recorded.network = row->spec.is_object() ? row->spec.value("network", "none") : "none";
  RunFilter filter;
  filter.session = id;
  filter.limit = Ledger::kMaxListLimit;
  recorded.execs_total = ledger_.list(filter).runs.size();
  return session_json_locked(recorded);
}

std::optional<uid_t> SessionManager::owner(const std::string& id) const {
  {
    std::lock_guard lock(mutex_);
    if (auto it = live_.find(id); it != live_.end()) return it->second->row.peer_uid;
  }
  if (auto row = ledger_.get_session(id)) return row->peer_uid;
  return std::nullopt;
}

std::size_t SessionManager::live_count() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

json SessionManager::create(const spec::SessionSpec& spec, Submission submission, const Peer& peer,
                           const SessionPlacement& placement) {
  if (!options_.state_dir.empty()) require_storage(options_.state_dir, options_.storage);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw http::ApiError("draining", "capsuled is shutting down and accepts no new sessions");
    if (live_.size() + reserved_ >= options_.max_sessions) {
      throw http::ApiError("too_many_sessions", "at most " + std::to_string(options_.max_sessions) +
                                                    " sessions may be live at once; delete one and retry");
    }
    // A non-root user may hold a quarter of the places, so one user cannot take them all.
    const std::size_t per_user = std::max<std::size_t>(1, options_.max_sessions / 4);
    const auto own = static_cast<std::size_t>(std::count_if(live_.begin(), live_.end(), [&](const auto& entry) {
      return entry.second->row.peer_uid == peer.uid;
    }));
    if (peer.uid != 0 && own >= per_user) {
      throw http::ApiError("too_many_sessions", "uid " + std::to_string(peer.uid) + " has " + std::to_string(own) +
                                                    " live sessions, the most one user may hold; delete one first");
    }
    ++reserved_;
  }
  struct Release {
    SessionManager& self;
    ~Release() {
      std::lock_guard lock(self.mutex_);
      --self.reserved_;
    }
  } release{*this};

  auto session = std::make_shared<Session>();
  session->id = sandbox::new_sandbox_id();
  session->spec = spec;
  session->submission = std::move(submission);
  session->dir = options_.sessions_dir + "/" + session->id;
  session->network = spec.environment.network;
  const bool proxied = spec.environment.network == "proxy";
  if (proxied && !options_.proxies.proxy) {
    throw http::ApiError("invalid_spec", "network: this capsuled has no package proxy configured");
  }
  pin_images(session->submission, options_.images);
  sandbox::SandboxSpec resolved = resolve_run(
      session->submission, ResolveContext{options_.images_dir, options_.policies_dir, session->dir, options_.images.store});
  // Sessions do not queue: a disk that does not fit beside the live boxes' disks now is 507, before any record.
  launcher_.require_disk_room(resolved.limits, sandbox::DiskRoom::kNow);
  if (proxied) {
    session->cutoff = proxy::parse_cutoff(spec.environment.as_of.value_or(""));
    if (!session->cutoff) throw http::ApiError("invalid_spec", "as_of: not a date the package proxy can show");
  }
  std::filesystem::create_directories(session->dir);
  if (proxied) {
    // ~/.m2 lives in the session's dir: like a package cache, it outlives a reset (the workspace does not).
    try {
      add_proxy_to_sandbox(resolved, *session->cutoff, session->dir, launcher_.options().host_id_base);
      if (!placement.serves_proxy) std::erase(resolved.loopback_listeners, kRunProxyPort);
    } catch (const std::exception&) {
      std::error_code ignored;
      std::filesystem::remove_all(session->dir, ignored);
      throw;
    }
  }
  session->environment = sandbox::environment_of(resolved);
  session->environment.session = true;
  session->environment.network_namespace = placement.network_namespace;
  if (!placement.hosts_file.empty()) {
    session->environment.mounts.push_back(sandbox::BindMount{placement.hosts_file, "/etc/hosts", true, true});
  }
  if (!placement.hostname.empty()) session->environment.hostname = placement.hostname;
  session->environment.protect = spec.protect;
  session->environment.protect_base = spec.environment.workspace ? "/workspace" : "/";
  session->process = sandbox::process_of(resolved);

  SessionRow& row = session->row;
  row.id = session->id;
  row.state = "ready";
  row.created_ms = unix_ms();
  row.last_used_ms = row.created_ms;
  row.labels = spec.environment.labels;
  row.spec = spec::to_json(spec);
  row.pinned = spec::to_json(session->submission.pinned);
  row.peer_uid = peer.uid;
  row.peer_pid = peer.pid;
  ledger_.insert_session(row);
  bool draining;
  {
    std::lock_guard lock(mutex_);
    draining = stopping_;  // stop() may have come since the check above: it ends only the sessions it saw
    if (!draining) live_[session->id] = session;
  }
  if (draining) {
    row.state = "lost";
    row.ended_ms = unix_ms();
    row.ended_reason = "capsuled stopped before its box was made";
    update_row(*session);
    std::error_code ignored;
    std::filesystem::remove_all(session->dir, ignored);
    throw http::ApiError("draining", "capsuled is shutting down and accepts no new sessions");
  }
  on_loop([this, session] { create_box(session); });
  std::unique_lock lock(mutex_);
  const bool settled = changed_.wait_for(
      lock, kSessionWaitLimit, [&] { return session->phase == Phase::kReady || session->phase == Phase::kEnded; });
  if (settled && session->phase == Phase::kReady) return session_json_locked(*session);
  if (!settled) {
    // The caller hears that it failed, so nobody owns it: it must not come up later and live until its TTL.
    on_loop([this, session] { begin_end(session, "failed", "its box did not serve execs in time"); });
  }
  const std::string reason = session->row.ended_reason.empty() ? "it did not start in time" : session->row.ended_reason;
  if (session->failure_code == "insufficient_storage") {  // its disk lost the room it had at the check above
    throw http::ApiError("insufficient_storage", "session " + session->id + ": " + reason);
  }
  throw http::ApiError("session_failed", "session " + session->id + ": the sandbox could not be made: " + reason);
}

void SessionManager::create_box(const std::shared_ptr<Session>& session) {
  session->created_ns = session->created_ns != 0 ? session->created_ns : sandbox::monotonic_ns();
  session->last_used_ns = sandbox::monotonic_ns();
  try {
    sandbox::EnvironmentSpec environment = session->environment;
    for (auto& overlay : environment.overlays) {
      if (overlay.target == "/workspace") overlay.seed_dir = session->workspace_seed;
    }
    session->workspace_seed.clear();
    session->box = launcher_.take_or_create(environment);  // one made ahead when the pool has it
    std::shared_ptr<RunProxy> proxy = serve_proxy_listeners(*session, session->box->take_listeners());
    session->start_deadline_ns = sandbox::monotonic_ns() + kStartLimitNs;
    std::lock_guard lock(mutex_);
    session->proxy = std::move(proxy);
    session->phase = Phase::kStarting;
  } catch (const std::exception& e) {
    session->box.reset();
    const auto* error = dynamic_cast<const base::Error*>(&e);
    session->failure_code = error != nullptr ? error->code() : "";
    begin_end(session, "failed", e.what());
  }
}

json SessionManager::remove(const std::string& id, const std::string& reason) {
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    session = live_session_locked(id);
  }
  on_loop([&] {
    std::lock_guard lock(mutex_);
    if (session->phase == Phase::kEnding || session->phase == Phase::kEnded) {
      throw http::ApiError("session_ended", "session " + id + " is ending");
    }
  });
  on_loop([&] { begin_end(session, "deleted", reason); });
  {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, kSessionWaitLimit, [&] { return session->phase == Phase::kEnded; });
  }
  return get(id).value_or(json::object());
}

void SessionManager::update_row(Session& session) {
  SessionRow row;
  {
    std::lock_guard lock(mutex_);
    row = session.row;
  }
  try {
    ledger_.update_session(row);
  } catch (const std::exception& e) {
    spdlog::error("session {}: recording it as {} failed: {}", row.id, row.state, e.what());
  }
}

void SessionManager::begin_end(const std::shared_ptr<Session>& session, const std::string& state,
                               const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (session->phase == Phase::kEnded) return;
    session->phase = Phase::kEnding;
  }
  if (!state.empty() || session->end_state.empty()) {
    session->end_state = state;
    session->end_reason = reason;
  }
  // Its execs end as cancelled, saying why; then everything in the box is killed and they drain.
  for (const auto& [exec_id, run] : session->running) {
    run->ended_by = state.empty() ? "the session was reset" : "the session ended (" + state + ": " + reason + ")";
    if (run->exec) run->exec->cancel();
  }
  session->spent.clear();
  if (session->box && session->held == 0) session->box->destroy();  // else when the last holder lets go
  std::shared_ptr<RunProxy> proxy;  // stops serving once the last exec that started under it is recorded
  session->proxy_listeners.clear();
  std::lock_guard lock(mutex_);
  proxy.swap(session->proxy);
}

void SessionManager::complete_end(const std::shared_ptr<Session>& session) {
  if (session->end_state.empty()) {  // recreate
    try {
      if (session->while_down && session->box) session->while_down(box_view(*session));
    } catch (const std::exception& e) {
      spdlog::error("session {}: while its box was down: {}", session->id, e.what());
    }
    session->while_down = nullptr;
    session->spent.clear();
    session->box.reset();
    create_box(session);
    return;
  }
  session->spent.clear();
  session->box.reset();
  {
    std::lock_guard lock(mutex_);
    session->row.state = session->end_state;
    session->row.ended_ms = unix_ms();
    session->row.ended_reason = session->end_reason;
  }
  update_row(*session);
  // Its dir (checkpoints: maybe many files) goes on the finisher, not on the thread every session waits on.
  finisher_.post([dir = session->dir] {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  });
  {
    // Together: whoever sees it ended finds it recorded and no longer counted among the live.
    std::lock_guard lock(mutex_);
    session->phase = Phase::kEnded;
    live_.erase(session->id);
  }
  spdlog::info("session {} ended: {} ({})", session->id, session->end_state, session->end_reason);
  changed_.notify_all();
}

std::int64_t SessionManager::expiry_deadline(const Session& session) const {
  std::int64_t deadline = 0;
  if (session.spec.ttl.count() > 0) deadline = session.created_ns + session.spec.ttl.count() * kMs;
  bool idle;
  {
    std::lock_guard lock(mutex_);
    idle = session.execs_running == 0;
  }
  if (idle && session.spec.idle_ttl.count() > 0) {
    const std::int64_t idle_at = session.last_used_ns + session.spec.idle_ttl.count() * kMs;
    if (deadline == 0 || idle_at < deadline) deadline = idle_at;
  }
  return deadline;
}

void SessionManager::expire(const std::shared_ptr<Session>& session) {
  const std::int64_t now = sandbox::monotonic_ns();
  const bool ttl_passed = session->spec.ttl.count() > 0 && now >= session->created_ns + session->spec.ttl.count() * kMs;
  const std::string reason = ttl_passed ? "ttl of " + std::to_string(session->spec.ttl.count()) + " ms passed"
                                        : "idle for idle_ttl " + std::to_string(session->spec.idle_ttl.count()) + " ms";
  if (session->spec.on_expiry == spec::OnExpiry::kDestroy) return begin_end(session, "expired", reason);
  session->box->freeze();
  {
    std::lock_guard lock(mutex_);
    session->phase = Phase::kFrozen;
    session->row.state = "frozen";
    session->row.ended_reason = reason;
  }
  update_row(*session);
  changed_.notify_all();
}

void SessionManager::loop() {
  for (;;) {
    try {
      if (!loop_once()) return;
    } catch (const std::exception& e) {
      spdlog::error("session loop: {}", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

bool SessionManager::loop_once() {
  std::deque<std::function<void()>> tasks;
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(mutex_);
    tasks.swap(tasks_);
    for (const auto& [id, session] : live_) sessions.push_back(session);
    if (stopping_ && tasks.empty() && live_.empty()) return false;
  }
  for (auto& task : tasks) task();
  bool settle_now = !tasks.empty();  // the tasks may have ended a box or an exec: no waiting before settling

  struct Owner {
    Session* session;
    ExecRun* exec;
  };
  std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
  std::vector<Owner> owners{{nullptr, nullptr}};
  std::int64_t deadline = 0;
  auto earliest = [&](std::int64_t at) {
    if (at != 0 && (deadline == 0 || at < deadline)) deadline = at;
  };
  for (const auto& session : sessions) {
    if (session->box) {
      for (const pollfd& p : session->box->interest()) {
        fds.push_back(p);
        owners.push_back({session.get(), nullptr});
      }
    }
    for (const auto& [id, run] : session->running) {
      for (const pollfd& p : run->exec->interest()) {
        fds.push_back(p);
        owners.push_back({session.get(), run.get()});
      }
      earliest(run->exec->next_deadline());
    }
    Phase phase;
    {
      std::lock_guard lock(mutex_);
      phase = session->phase;
    }
    if (phase == Phase::kStarting) earliest(session->start_deadline_ns);
    if (phase == Phase::kReady) earliest(expiry_deadline(*session));
    if (phase == Phase::kFrozen && session->spec.ttl.count() > 0) earliest(session->created_ns + session->spec.ttl.count() * kMs);
    if (phase == Phase::kEnding && session->running.empty() && session->held == 0) settle_now = true;
  }
  const std::int64_t now = sandbox::monotonic_ns();
  const int timeout_ms = settle_now ? 0
                         : deadline == 0 ? -1
                                         : static_cast<int>(std::max<std::int64_t>(0, (deadline - now) / kMs + 1));
  if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return true;
  if (fds[0].revents != 0) {
    std::uint64_t count;
    (void)!read(wake_fd_, &count, sizeof count);
  }
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const Owner& owner = owners[i];
    try {
      if (owner.exec != nullptr) {
        if (owner.exec->exec) owner.exec->exec->handle(fds[i].fd, fds[i].revents);
      } else if (owner.session->box) {
        owner.session->box->handle(fds[i].fd, fds[i].revents);
      }
    } catch (const std::exception& e) {
      spdlog::error("session {}: {}", owner.session->id, e.what());
    }
  }
  const std::int64_t after = sandbox::monotonic_ns();
  for (const auto& session : sessions) {
    std::vector<std::shared_ptr<ExecRun>> runs;
    for (const auto& [id, run] : session->running) runs.push_back(run);
    for (const auto& run : runs) {
      sandbox::Result result;
      try {
        run->exec->tick(after);
        if (!run->exec->finished()) continue;
        result = run->exec->finish();
      } catch (const std::exception& e) {
        result = sandbox::Result{};
        result.status = sandbox::Status::kInternalError;
        result.reason = std::string("supervision failed: ") + e.what();
      }
      finish_exec(run, std::move(result));
    }
    // One session's trouble (a box that will not freeze, a signal that fails) ends that session, never the loop's
    // round for the sessions after it.
    try {
      settle(session, after);
    } catch (const std::exception& e) {
      spdlog::error("session {}: {}", session->id, e.what());
      try {
        begin_end(session, "failed", e.what());  // the next round completes the end once its execs are done
      } catch (const std::exception& again) {
        spdlog::error("session {}: ending it: {}", session->id, again.what());
      }
    }
  }
  return true;
}

void SessionManager::settle(const std::shared_ptr<Session>& session, std::int64_t after) {
  {
    Phase phase;
    {
      std::lock_guard lock(mutex_);
      phase = session->phase;
    }
    sandbox::Sandbox* box = session->box.get();
    if (phase == Phase::kStarting && box != nullptr) {
      if (box->ready()) {
        {
          std::lock_guard lock(mutex_);
          session->phase = Phase::kReady;
        }
        changed_.notify_all();
        box->prepare_exec();  // the first exec's cgroup, while the creator reads its answer
      } else if (box->setup_error() || box->ended() || after >= session->start_deadline_ns) {
        std::string reason = "init ended before it served execs";
        if (box->setup_error()) {
          const base::Cause& cause = *box->setup_error();
          reason = cause.step + (cause.path.empty() ? "" : " " + cause.path) + ": " + cause.detail +
                   (cause.errno_value != 0 ? std::string(" (") + strerror(cause.errno_value) + ")" : "");
        } else if (!box->ended()) {
          reason = "init did not serve execs within 60 s";
        }
        begin_end(session, "failed", reason);
      }
    } else if ((phase == Phase::kReady || phase == Phase::kFrozen) && box != nullptr && box->ended()) {
      begin_end(session, "failed", "the sandbox's init ended unexpectedly");
    } else if (phase == Phase::kReady) {
      const std::int64_t expiry = expiry_deadline(*session);
      if (expiry != 0 && after >= expiry) expire(session);
    } else if (phase == Phase::kFrozen && session->spec.ttl.count() > 0 &&
               after >= session->created_ns + session->spec.ttl.count() * kMs) {
      begin_end(session, "expired", "ttl of " + std::to_string(session->spec.ttl.count()) + " ms passed (frozen)");
    }
    {
      std::lock_guard lock(mutex_);
      phase = session->phase;
    }
    if (phase == Phase::kEnding && session->running.empty() && session->held == 0) complete_end(session);
  }
}

}  // namespace capsule::daemon

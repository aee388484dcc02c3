// A live session's box lent out: to the file routes on the session thread (with_box), frozen to a caller's own
// thread for long copies (with_frozen_box), or taken down and made again around a task (recreate: reset).
#include <spdlog/spdlog.h>

#include "daemon/sessions/session_manager.h"
#include "daemon/sessions/session_state.h"
#include "http/response.h"
#include "sandbox/command.h"
#include "sandbox/error.h"

namespace capsule::daemon {

SessionBox SessionManager::box_view(const Session& session) const {
  SessionBox view{*session.box, session.dir, "", "", {}, nullptr};
  for (const auto& overlay : session.environment.overlays) {
    if (overlay.target != "/workspace") continue;
    view.workspace_upper = overlay.upper_dir;
    view.workspace_work = overlay.work_dir;
    view.workspace_layers = overlay.layers;
    const auto& opened = session.submission.workspace_dir;
    if (opened && !overlay.layers.empty() && overlay.layers.back() == opened->proc_path()) {
      view.workspace_lower = opened;
    }
  }
  return view;
}

void SessionManager::with_box(const std::string& id, const BoxTask& task) {
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    session = live_session_locked(id);
  }
  on_loop([&] {
    {
      std::lock_guard lock(mutex_);
      if (session->phase == Phase::kFrozen) throw http::ApiError("session_frozen", "session " + id + " is frozen");
      if (session->phase != Phase::kReady || !session->box) {
        throw http::ApiError("session_ended", "session " + id + " is not ready");
      }
    }
    session->last_used_ns = sandbox::monotonic_ns();  // a file call counts as use for idle_ttl
    task(box_view(*session));
  });
}

void SessionManager::with_frozen_box(const std::string& id, const BoxTask& task) {
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    session = live_session_locked(id);
  }
  std::optional<SessionBox> view;
  on_loop([&] {
    {
      std::lock_guard lock(mutex_);
      if (session->phase == Phase::kFrozen) throw http::ApiError("session_frozen", "session " + id + " is frozen");
      if (session->phase != Phase::kReady || !session->box) {
        throw http::ApiError("session_ended", "session " + id + " is not ready");
      }
    }
    try {
      session->box->freeze();
    } catch (const sandbox::SandboxError& e) {
      throw http::ApiError("internal_error", std::string("freezing the box: ") + e.what());
    }
    ++session->held;
    session->last_used_ns = sandbox::monotonic_ns();
    view.emplace(box_view(*session));
  });
  struct Release {
    SessionManager& self;
    std::shared_ptr<Session> session;
    ~Release() {
      try {
        self.on_loop([this] { self.release_box(session); });
      } catch (const std::exception&) {  // draining: stop() ends the session, and its box with it
        std::lock_guard lock(self.mutex_);
        self.tasks_.push_back([&self = self, session = session] { self.release_box(session); });
        self.wake();
      }
    }
  } release{*this, session};
  task(*view);
}

void SessionManager::release_box(const std::shared_ptr<Session>& session) {
  if (--session->held > 0) return;
  Phase phase;
  {
    std::lock_guard lock(mutex_);
    phase = session->phase;
  }
  if (phase == Phase::kEnding && session->box) {
    session->box->destroy();
  } else if (phase == Phase::kReady && session->box && session->box->frozen()) {  // an exec's record holds it unfrozen
    try {
      session->box->thaw();
    } catch (const std::exception& e) {
      begin_end(session, "failed", std::string("thawing the box: ") + e.what());
    }
  }
  std::vector<std::shared_ptr<ExecRun>> waiting;
  waiting.swap(session->waiting);
  for (const auto& run : waiting) start_exec(run);
}

void SessionManager::recreate(const std::string& id, const BoxTask& while_down, const std::string& workspace_seed) {
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    session = live_session_locked(id);
  }
  on_loop([&] {
    {
      std::lock_guard lock(mutex_);
      if (session->phase != Phase::kReady && session->phase != Phase::kFrozen) {
        throw http::ApiError("session_ended", "session " + id + " is not ready");
      }
    }
    session->while_down = while_down;
    session->workspace_seed = workspace_seed;
    begin_end(session, "", "");
  });
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, kSessionWaitLimit, [&] { return session->phase == Phase::kReady || session->phase == Phase::kEnded; });
  if (session->phase != Phase::kReady) {
    if (session->failure_code == "insufficient_storage") {  // another box took its disk's room while it was down
      throw http::ApiError("insufficient_storage", "session " + id + ": " + session->row.ended_reason);
    }
    throw http::ApiError("session_failed", "session " + id + ": the sandbox could not be made again: " +
                                               session->row.ended_reason);
  }
}

}  // namespace capsule::daemon

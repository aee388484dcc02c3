// The inside of SessionManager shared by its files: a live session and one exec of it, and who may touch
// which field (the manager's mutex, or only its loop thread).
#pragma once

#include <chrono>

#include "daemon/sessions/session_manager.h"

namespace capsule::daemon {

// How long a caller waits for the session thread to make, end or remake a box.
inline constexpr auto kSessionWaitLimit = std::chrono::seconds(90);

struct SessionManager::Session {
  std::string id;
  spec::SessionSpec spec;
  Submission submission;  // keeps a non-root caller's opened workspace alive
  sandbox::EnvironmentSpec environment;
  sandbox::ProcessSpec process;  // what every exec starts from
  std::string dir;
  std::optional<proxy::Cutoff> cutoff;  // network "proxy": the date its package proxy shows
  // Guarded by mutex_:
  SessionRow row;
  Phase phase = Phase::kStarting;
  std::uint64_t execs_total = 0;
  std::uint64_t execs_running = 0;  // accepted and not yet recorded
  sandbox::CgroupUsage usage;
  // network "proxy": serving the box's listeners; made with each box (a reset makes a new one), set and dropped
  // by the loop thread.
  std::shared_ptr<RunProxy> proxy;
  // What the next exec gets: "proxy" (the proxy listens in the box) or "none" (switched off, or the spec's
  // network). Changed only between execs (set_network, session_network.cpp).
  std::string network;
  // Loop thread only:
  std::unique_ptr<sandbox::Sandbox> box;
  // The box's proxy listening sockets, kept (duplicates of those the proxy serves) so that switching the network
  // off stops their listening and switching it on listens again on the same port; closed with the box.
  std::vector<base::UniqueFd> proxy_listeners;
  std::map<std::string, std::shared_ptr<ExecRun>> running;
  // Ended execs, tidied (cgroup removed, usage read, the next exec prepared) once their answer is on its way, or
  // before the next exec or the box's end if that comes first: on a 2-vCPU machine the tidying took the CPU
  // the answer needed.
  std::vector<std::unique_ptr<sandbox::Exec>> spent;
  std::int64_t start_deadline_ns = 0;
  std::int64_t created_ns = 0;
  std::int64_t last_used_ns = 0;
  std::string end_state;  // empty while ending: the box is made again (recreate)
  std::string end_reason;
  std::string failure_code;  // the code of the error that failed its box's creation, if it was a base::Error
  BoxTask while_down;
  // with_frozen_box: callers holding the box frozen off this thread, and exec records reading its workspace
  // (ExecRun::holds_box, not frozen). While any does, the box is neither thawed nor destroyed, and execs wait
  // in `waiting` (started, or cancelled, when the last one lets go).
  int held = 0;
  std::vector<std::shared_ptr<ExecRun>> waiting;
  std::string workspace_seed;  // recreate's seed for the next box's workspace upper, then cleared
};

struct SessionManager::ExecRun {
  std::string id;
  std::shared_ptr<Session> session;
  spec::ExecSpec spec;
  sandbox::ProcessSpec process;
  // Its ledger row as written so far (queued by exec(); running, under start_recording, and finished by the
  // finisher's jobs): its answer is made from it, with no read-back.
  RunRow row;
  std::vector<Listener> listeners;  // guarded by mutex_
  // Loop thread, then the finisher's:
  std::unique_ptr<sandbox::Exec> exec;
  std::unique_ptr<LogWriter> stdout_log;
  std::unique_ptr<LogWriter> stderr_log;
  std::string ended_by;  // loop thread: why the session's end cancelled it ("" while nothing did)
  // Its `running` row: written once, by whichever finisher job comes first (the finisher has two threads, so the
  // job that records its end may overtake the one that records its start).
  std::mutex start_recording;
  bool start_recorded = false;  // guarded by start_recording
  std::int64_t started_ms = 0;
  std::shared_ptr<RunProxy> proxy;  // the session's proxy when the exec started, and
  std::size_t proxy_served_before = 0;  // how many objects it had served by then
  // spec.baseline's run object, read at submit as the caller may see it (null: none asked, or not read).
  std::shared_ptr<const nlohmann::json> baseline_run;
  // An exec with collect globs, or of a session with protect globs and a cow workspace, holds the box (SessionManager::Session::held) from its end until its record has
  // read the workspace, so the box, its disk and the workspace upper on it stay meanwhile; loop thread, then
  // the finisher's. The workspace dirs the record reads: its overlay upper and lower ("" for no cow workspace).
  bool holds_box = false;
  std::string record_upper, record_lower;
};

}  // namespace capsule::daemon

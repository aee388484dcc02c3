// SessionManager: live sandboxes that execs run in, many times (agents). Owns every session's box and drives
// all boxes and their execs from ONE thread (a poll loop); each exec is a ledger row with logs, like a run.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/ledger.h"
#include "daemon/logs/log_store.h"
#include "daemon/resolve.h"
#include "daemon/runs/disk_guard.h"
#include "daemon/runs/worker_pool.h"
#include "daemon/runs/run_manager.h"
#include "daemon/runs/run_proxy.h"
#include "sandbox/launcher.h"
#include "spec/session_spec.h"

namespace capsule::daemon {

struct SessionManagerOptions {
  std::size_t max_sessions = 64;  // live (ready or frozen) at once; more: 429 too_many_sessions
  std::string state_dir;          // its free space is checked against `storage` at each create
  StorageWatermark storage;
  std::string sessions_dir;       // per-session host dir (workspace upper/work): <sessions_dir>/<id>
  std::string images_dir;
  std::string policies_dir;
  ImageCatalog images;
  spec::LimitPolicy limits;       // an exec's own timeout / cpu_time / kill_grace / output_cap are clamped to it
  RunProxyContext proxies;        // serves network "proxy" sessions; without it they are refused
};

// What the file, diff, checkpoint and reset routes get of a live session, on the session thread.
struct SessionBox {
  sandbox::Sandbox& sandbox;       // open_root(), host_id_base(), environment()
  std::string dir;                 // the session's host dir
  // The cow workspace's overlay ("" and empty when the session has no cow workspace).
  std::string workspace_upper;
  std::string workspace_work;
  std::vector<std::string> workspace_layers;
  // That overlay's lower when it is a directory a non-root caller named: the descriptor it was opened through as
  // that caller (its /proc/self/fd path is the layer), which diffs read, never a path; null otherwise.
  std::shared_ptr<const OpenedHostPath> workspace_lower;
};

// Where a stack puts a service's box (daemon/stacks/); set by capsuled, never taken from a request.
struct SessionPlacement {
  std::string network_namespace;  // joined instead of a namespace of the box's own (sandbox/net_namespace.h)
  std::string hosts_file;         // a host file bound read-only at /etc/hosts
  std::string hostname;
  // A network "proxy" box opens the proxy's loopback listener in its namespace; in a shared one, only one box
  // may (the others reach it there, through the same configuration).
  bool serves_proxy = true;
};

class SessionManager {
 public:
  // Exec events as RunManager sends them: queued, started, stdout/stderr ({"data_b64"}), finished ({"run"}).
  using Listener = RunManager::Listener;
  using BoxTask = std::function<void(const SessionBox&)>;

  SessionManager(sandbox::Launcher& launcher, Ledger& ledger, LogStore& logs, SessionManagerOptions options);
  ~SessionManager();  // stop()
  // Ends every session (recorded as lost: "capsuled stopped"), records their execs and joins the thread;
  // later calls that need the thread are 503 draining. Idempotent.
  void stop();
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // Pins and resolves the environment as a run's, creates the box and waits until it serves execs. The
  // submission's spec is spec.environment (authorize_workspace already applied). Returns the session object.
  // Throws ApiError as runs do (400/404/403), 429 too_many_sessions, 507, or 500 session_failed (the box
  // could not be made; the session is recorded as failed).
  nlohmann::json create(const spec::SessionSpec& spec, Submission submission, const Peer& peer,
                        const SessionPlacement& placement = {});
  // The session object, live or recorded; nullopt when unknown.
  std::optional<nlohmann::json> get(const std::string& id) const;
  // Owner uid of a session (live or recorded); nullopt when unknown.
  std::optional<uid_t> owner(const std::string& id) const;
  // Kills everything, removes the box; recorded as deleted. Returns the session object. 404 unknown, 409
  // session_ended when it has already ended.
  nlohmann::json remove(const std::string& id, const std::string& reason);

  // Accepts an exec (a queued ledger row naming the session) and starts it on the session thread; returns its
  // id (a run id). `listener` sees every event of it. Throws 404, 409 session_ended / session_frozen / conflict
  // (being reset). A process that cannot start (a missing cwd or command) ends as setup_failed, as a run does.
  // `baseline_run`: spec.baseline's run object as the caller could read it (daemon/api/api.h read_baseline).
  std::string exec(const std::string& id, const spec::ExecSpec& spec, const Peer& peer, Listener listener = {},
                   std::shared_ptr<const nlohmann::json> baseline_run = nullptr);
  // Signals every process of a running exec. 404 when the session has no such exec, 409 already_finished.
  void signal_exec(const std::string& id, const std::string& exec_id, int signo);
  // POST /v1/runs/{exec_id}/cancel of an exec: TERM, grace, KILL of its tree, ending as cancelled. Same errors.
  // Interactive input of a running exec started with stdin_open or pty; `close`: EOF after the bytes (on a pty
  // the terminal's EOF character). 404, 409 already_finished, 409 conflict when its stdin is closed or full.
  void write_exec_stdin(const std::string& id, const std::string& exec_id, const std::string& bytes, bool close);
  // A pty exec's window size (its foreground job gets SIGWINCH); nothing for other execs. 404, 409.
  void resize_exec(const std::string& id, const std::string& exec_id, std::uint16_t rows, std::uint16_t cols);
  void cancel_exec(const std::string& id, const std::string& exec_id);

  // Runs `task` on the session thread with the live box (no exec starts or ends meanwhile). 404 unknown, 409
  // session_ended / session_frozen. Keep it short: every session waits for it.
  void with_box(const std::string& id, const BoxTask& task);
  // Runs `task` on the CALLING thread with the box frozen (nothing in it runs or changes files), for long work
  // such as copying a checkpoint: every other session goes on meanwhile, and this one's new execs wait. The
  // box stays until the task returns, even if the session is deleted or expires meanwhile. 404, 409 as
  // with_box.
  void with_frozen_box(const std::string& id, const BoxTask& task);
  // Ends the running execs (cancelled: "the session was reset") and the box, runs `while_down` (its `sandbox` is
  // destroyed; the dirs are free to change), and makes the box again from the same environment; waits until it
  // serves execs. With limits.disk (default 10g) the workspace upper lives on the box's own disk, bound at
  // workspace_upper only while the box lives: in while_down that dir is empty, the new box starts with an empty
  // upper (a reset) and needs it empty (Launcher). Copy out what a checkpoint needs in with_box first.
  // `workspace_seed`: a host dir the new box's workspace upper starts as a copy of (a checkpoint), on either disk.
  // 404, 409 session_ended, 500 session_failed when the new box cannot be made (the session is then failed).
  void recreate(const std::string& id, const BoxTask& while_down, const std::string& workspace_seed = "");

  // Switches a network "proxy" session's package proxy off (`online` false: the proxy's listener in the box stops
  // listening, so a connection to it is refused and the box reaches nothing) or on again, between execs; each
  // exec's spec says which it ran with ("network"), and a reset keeps the switch. Returns the session object.
  // 404, 409 session_ended / session_frozen / conflict (being reset) / execs_running (an exec is queued or
  // running), 400 invalid_request for a session without a proxy listener of its own (network "none", or a
  // stack's service in a shared namespace).
  nlohmann::json set_network(const std::string& id, bool online);

  std::size_t live_count() const;

 private:
  struct Session;
  struct ExecRun;
  enum class Phase { kStarting, kReady, kFrozen, kEnding, kEnded };

  void loop();
  bool loop_once();
  // After a poll round: a starting box ready or failed, a box that died, expiry, an ending session's end.
  void settle(const std::shared_ptr<Session>& session, std::int64_t now_ns);
  // Runs `task` on the loop thread and waits for it; its exception is rethrown here.
  void on_loop(std::function<void()> task);
  // `action` on a running exec of the session, on the loop thread; 409 already_finished or 404 otherwise.
  void act_on_exec(const std::string& id, const std::string& exec_id, const std::function<void(sandbox::Exec&)>& action);
  void wake();
  nlohmann::json session_json_locked(const Session& session) const;
  std::shared_ptr<Session> live_session_locked(const std::string& id) const;
  void start_exec(const std::shared_ptr<ExecRun>& run);
  // A holder's end (with_frozen_box, an exec's record), on the loop thread: thaw a frozen box (unless the session
  // froze or ended meanwhile), destroy a box whose session ended meanwhile, start the execs that waited.
  void release_box(const std::shared_ptr<Session>& session);
  void finish_exec(const std::shared_ptr<ExecRun>& run, sandbox::Result result);
  // Loop thread: the ended execs' cgroups removed, the box's usage read, the next exec prepared.
  void tidy_spent_execs(Session& session);
  // Loop thread, as an exec ends: an exec with collect globs holds the live box (run.holds_box) and notes the
  // workspace dirs its record reads; the finisher lets go with release_record_hold once the record is built.
  void hold_box_for_record(ExecRun& run);
  void release_record_hold(const std::shared_ptr<ExecRun>& run);
  // Loop thread, as a box is made: keeps duplicates of its proxy listeners and serves them when the network is
  // on (stops their listening when it is off). Returns the proxy, or null.
  std::shared_ptr<RunProxy> serve_proxy_listeners(Session& session, std::vector<base::UniqueFd> listeners);
  // On the finisher: closes its logs, records it, sends "finished" to its listeners, then has the loop tidy.
  void post_exec_record(const std::shared_ptr<ExecRun>& run, sandbox::Result result);
  // On the finisher: the exec's `running` row, unless already written.
  void record_exec_start(ExecRun& run);
  void notify(const std::shared_ptr<ExecRun>& run, const nlohmann::json& event);
  void begin_end(const std::shared_ptr<Session>& session, const std::string& state, const std::string& reason);
  void complete_end(const std::shared_ptr<Session>& session);
  void create_box(const std::shared_ptr<Session>& session);
  void update_row(Session& session);
  std::int64_t expiry_deadline(const Session& session) const;
  void expire(const std::shared_ptr<Session>& session);
  SessionBox box_view(const Session& session) const;

  sandbox::Launcher& launcher_;
  Ledger& ledger_;
  LogStore& logs_;
  SessionManagerOptions options_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a session's phase changed
  std::map<std::string, std::shared_ptr<Session>> live_;  // not yet ended, by id
  std::size_t reserved_ = 0;                              // creates in progress, counted against the cap
  std::deque<std::function<void()>> tasks_;               // for the loop thread
  bool stopping_ = false;

  int wake_fd_ = -1;
  WorkerPool finisher_{"session-finish", 2};
  std::thread thread_;
};

}  // namespace capsule::daemon

// The daemon's run lifecycle: queue -> start (resolve, launch) -> supervise (one poll loop for all live
// sandboxes) -> hand off to a finisher: record (result, diff, JUnit counts) -> ledger -> "finished".
#include "daemon/runs/run_manager.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "base/base64.h"
#include "base/thread_name.h"
#include "http/response.h"
#include "daemon/runs/disk_guard.h"
#include "daemon/record/run_record.h"
#include "sandbox/command.h"
#include "sandbox/result_json.h"
#include "sandbox/scratch.h"

namespace capsule::daemon {
namespace {

const std::vector<double> kSetupBucketsMs = {5, 10, 25, 50, 100, 250, 500, 1000, 2500};

bool through_proxy(const Submission& submission) { return submission.spec.network == "proxy"; }

}  // namespace

std::int64_t unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

struct RunManager::Run {
  std::string id;
  Submission submission;
  sandbox::SandboxSpec sandbox_spec;  // resolved once, at submission (names checked, policy read)
  std::string run_dir;
  std::vector<Listener> listeners;  // guarded by RunManager::mutex_
  std::atomic<bool> cancel_requested{false};
  bool started = false;             // guarded by mutex_
  // guarded by mutex_: its disk found no room beside the live boxes' disks; it waits at the queue's front until
  // then (sandbox::DiskBudget), and is tried again no earlier.
  std::int64_t disk_retry_ns = 0;
  // A start thread's, then (handed over under mutex_) the supervision thread's, then the finisher's:
  std::unique_ptr<sandbox::StartedSandbox> sandbox;
  std::unique_ptr<LogWriter> stdout_log;
  std::unique_ptr<LogWriter> stderr_log;
  std::unique_ptr<RunProxy> proxy;  // network "proxy": stopped once the sandbox is gone
  // From its start until "finished" is sent: boxes made ahead wait, so they take no CPU from its answer.
  sandbox::StartGate::Ticket answering;
  // Its ledger row as written so far (the submitter's, then the supervision thread's, then the finisher's):
  // the answer is made from it, with no read-back.
  RunRow row;
};

RunManager::RunManager(sandbox::Launcher& launcher, Ledger& ledger, LogStore& logs, RunManagerOptions options)
    : launcher_(launcher), ledger_(ledger), logs_(logs), options_(std::move(options)) {
  stats_.setup_buckets_ms = kSetupBucketsMs;
  stats_.setup_bucket_counts.assign(kSetupBucketsMs.size() + 1, 0);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  std::filesystem::create_directories(options_.runs_dir);
  thread_ = std::thread([this] {
    base::name_this_thread("run-supervise");
    supervise_loop();
  });
}

RunManager::~RunManager() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    draining_ = true;
    for (auto& [id, run] : live_) run->cancel_requested = true;
  }
  wake();
  thread_.join();    // once every live run, each started one handed to the loop, has finished
  starter_.stop();
  finisher_.stop();  // every run handed off is recorded before the manager goes away
  close(wake_fd_);
}

void RunManager::wake() {
  std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
}

std::string RunManager::submit(const Submission& submission, const Peer& peer, Listener listener) {
  // Before anything is written for it: below the watermark the ledger and the logs keep their room.
  if (!options_.state_dir.empty()) require_storage(options_.state_dir, options_.storage);
  auto run = std::make_shared<Run>();
  run->id = sandbox::new_sandbox_id();
  run->submission = submission;
  run->run_dir = options_.runs_dir + "/" + run->id;
  if (listener) run->listeners.push_back(std::move(listener));
  // The image is pinned to a digest now, so the run uses what it was accepted with even if a ref moves.
  // Unknown names are the client's error (404/400) now; what vanishes before the start fails its setup.
  if (through_proxy(run->submission) && !options_.proxies.proxy) {
    throw http::ApiError("invalid_spec", "network: this capsuled has no package proxy configured");
  }
  pin_images(run->submission, options_.images);
  run->sandbox_spec = resolve_run(
      run->submission, ResolveContext{options_.images_dir, options_.policies_dir, run->run_dir, options_.images.store});
  // A disk that would not fit even beside no other box can never start: 507. One that does waits in the queue
  // for the live boxes' disks to make room.
  launcher_.require_disk_room(run->sandbox_spec.limits, sandbox::DiskRoom::kEver);
  {
    std::lock_guard lock(mutex_);
    if (draining_) throw http::ApiError("draining", "capsuled is shutting down and accepts no new runs");
    // Runs popped from the queue count until they finish, so a burst of submissions cannot overfill it
    // before the supervision thread gets to start any of them.
    if (running_ + queue_.size() >= options_.max_concurrent + options_.max_queue) {
      throw http::ApiError("queue_full", "the run queue is full (" + std::to_string(queue_.size()) + " waiting, " +
                                            std::to_string(running_) + " running); retry later");
    }
    run->row = queued_row(run->id, spec::to_json(run->submission.spec), spec::to_json(run->submission.pinned),
                          run->submission.spec.labels, peer.uid, peer.pid, unix_ms());
    ledger_.insert_queued(run->row);
    live_[run->id] = run;
    // Under the lock, before the supervision thread can see the run: "queued" always comes before "started".
    for (const auto& first : run->listeners) first({{"event", "queued"}, {"id", run->id}});
    queue_.push_back(run);
  }
  wake();
  return run->id;
}

void RunManager::cancel(const std::string& id) {
  {
    std::lock_guard lock(mutex_);
    auto it = live_.find(id);
    if (it != live_.end()) {
      it->second->cancel_requested = true;
      wake();
      return;
    }
  }
  if (ledger_.get(id)) throw http::ApiError("already_finished", "run " + id + " has already finished");
  throw http::ApiError("not_found", "no run with id " + id);
}

bool RunManager::subscribe(const std::string& id, Listener listener) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(id);
  if (it == live_.end()) return false;
  it->second->listeners.push_back(std::move(listener));
  return true;
}

RunStats RunManager::stats() const {
  RunStats copy;
  {
    std::lock_guard lock(mutex_);
    copy = stats_;
    copy.active = running_;
    copy.queued = queue_.size();
    copy.draining = draining_;
  }
  copy.pool = launcher_.pool_stats();  // not under mutex_: the pool's lock may be held while it stops
  return copy;
}

void RunManager::drain(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  auto idle = [&] { return live_.empty() && tearing_down_ == 0; };
  if (!idle_.wait_for(lock, grace, idle)) {
    for (auto& [id, run] : live_) run->cancel_requested = true;
    wake();
    idle_.wait(lock, idle);
  }
}

void RunManager::notify(const std::shared_ptr<Run>& run, const nlohmann::json& event) {
  std::vector<Listener> listeners;
  {
    std::lock_guard lock(mutex_);
    listeners = run->listeners;
  }
  for (const auto& listener : listeners) listener(event);
}

std::int64_t RunManager::start_queued_locked(std::vector<std::shared_ptr<Run>>& started) {
  while (running_ < options_.max_concurrent && !queue_.empty()) {
    std::shared_ptr<Run> run = queue_.front();
    if (run->disk_retry_ns > sandbox::monotonic_ns()) return run->disk_retry_ns;
    queue_.pop_front();
    run->started = true;
    ++running_;
    started.push_back(run);
  }
  return 0;
}

void RunManager::start_run(const std::shared_ptr<Run>& run) {
  if (run->cancel_requested) {
    sandbox::Result result;
    result.status = sandbox::Status::kCancelled;
    result.reason = "cancelled before it started";
    finish_run(run, result);
    return;
  }
  run->answering = launcher_.hold_starts();
  const std::int64_t started_ms = unix_ms();
  // Every run that leaves the queue goes queued -> running -> finished, a setup failure too. The running row is
  // written once the command is on its way (off the start's path), always before its end is seen, which the
  // supervision loop does only once the run is handed to it, below. A ledger that cannot take it is logged; the
  // finished row is written all the same.
  auto mark_started = [&] {
    try {
      ledger_.mark_running(run->id, started_ms);
      run->row.state = "running";
      run->row.started_ms = started_ms;
      notify(run, {{"event", "started"}, {"id", run->id}});
    } catch (const std::exception& e) {
      spdlog::error("run {}: recording it as running failed: {}", run->id, e.what());
    }
  };
  try {
    run->stdout_log = logs_.open_writer(run->id, Stream::kStdout);
    run->stderr_log = logs_.open_writer(run->id, Stream::kStderr);
    sandbox::RunHooks hooks;
    Run* raw = run.get();
    // The relay: exact bytes, base64 in the event (JSON strings cannot carry arbitrary bytes); no re-encoding.
    hooks.on_output = [this, raw, run_ref = std::weak_ptr<Run>(run)](sandbox::OutputStream stream, std::string_view chunk) {
      const bool is_stdout = stream == sandbox::OutputStream::kStdout;
      (is_stdout ? raw->stdout_log : raw->stderr_log)->append(chunk);
      if (auto self = run_ref.lock()) {
        {
          std::lock_guard lock(mutex_);
          if (self->listeners.empty()) return;
        }
        notify(self, {{"event", is_stdout ? "stdout" : "stderr"}, {"id", raw->id}, {"data_b64", base::base64_encode(chunk)}});
      }
    };
    sandbox::SandboxSpec sandbox_spec = run->sandbox_spec;
    std::optional<proxy::Cutoff> cutoff;
    if (through_proxy(run->submission)) {
      cutoff = proxy::parse_cutoff(run->submission.spec.as_of.value_or(""));
      if (!cutoff) throw std::runtime_error("network proxy: unusable as_of");
      add_proxy_to_sandbox(sandbox_spec, *cutoff, run->run_dir, launcher_.options().host_id_base);
    }
    run->sandbox = launcher_.start(sandbox_spec, hooks);
    if (cutoff) {
      run->proxy = std::make_unique<RunProxy>(*options_.proxies.io, *options_.proxies.proxy, *cutoff,
                                              run->sandbox->take_listeners(), run->submission.frozen,
                                              run->submission.spec.as_of_packages);
    }
  } catch (const sandbox::SandboxError& e) {
    run->sandbox.reset();
    if (e.code() == "insufficient_storage" && requeue_for_disk_room(run, e.what())) return;
    mark_started();
    finish_run(run, sandbox::Launcher::setup_failure(e));
    return;
  } catch (const std::exception& e) {
    run->sandbox.reset();
    mark_started();
    sandbox::Result result;
    result.status = sandbox::Status::kInternalError;
    result.reason = std::string("starting the run failed: ") + e.what();
    finish_run(run, result);
    return;
  }
  mark_started();
  {
    std::lock_guard lock(mutex_);
    started_.push_back(run);
  }
  wake();
}

bool RunManager::requeue_for_disk_room(const std::shared_ptr<Run>& run, const std::string& why) {
  constexpr std::int64_t kDiskRetryNs = 250 * 1000000LL;
  run->stdout_log.reset();  // nothing written yet: made again at its next start
  run->stderr_log.reset();
  run->answering.release();
  {
    std::lock_guard lock(mutex_);
    if (draining_) return false;
    if (run->disk_retry_ns == 0) spdlog::info("run {} waits in the queue for disk room: {}", run->id, why);
    run->started = false;
    --running_;
    run->disk_retry_ns = sandbox::monotonic_ns() + kDiskRetryNs;
    queue_.push_front(run);
  }
  wake();
  return true;
}

void RunManager::finish_run(const std::shared_ptr<Run>& run, sandbox::Result result) {
  finisher_.post([this, run, result = std::move(result)]() mutable { complete_run(run, std::move(result)); });
}

void RunManager::record_finished(const std::shared_ptr<Run>& run, const std::string& state,
                                 const nlohmann::json& record) {
  // What the row says once written (and what the answer says, even when no write lands: it is what happened).
  auto landed = [&run](const std::string& final_state, const nlohmann::json& final_record, std::int64_t at_ms) {
    run->row.state = final_state;
    run->row.outcome = final_record;
    run->row.finished_ms = at_ms;
  };
  landed(state, record, unix_ms());
  try {
    ledger_.mark_finished(run->id, state, record, *run->row.finished_ms);
    return;
  } catch (const std::exception& e) {
    spdlog::error("run {}: recording it as {} failed: {}; releasing its box and trying again", run->id, state, e.what());
  }
  // A full disk (the box's own disk or its writes can be what filled it): what the box holds goes first.
  release_box(run);
  try {
    landed(state, record, unix_ms());
    ledger_.mark_finished(run->id, state, record, *run->row.finished_ms);
    return;
  } catch (const std::exception& e) {
    spdlog::error("run {}: recording it as {} failed again: {}", run->id, state, e.what());
    try {
      sandbox::Result none;
      none.wall_ms = record.contains("result") ? record["result"].value("wall_ms", 0.0) : 0.0;
      landed("internal_error", failure_record(std::string("recording the run failed: ") + e.what(), none), unix_ms());
      ledger_.mark_finished(run->id, "internal_error", *run->row.outcome, *run->row.finished_ms);
    } catch (const std::exception& again) {
      spdlog::error("run {}: recording it as internal_error failed too: {}", run->id, again.what());
      (*run->row.outcome)["record_error"] = std::string("the ledger did not record this end: ") + again.what();
    }
  }
}

// The box (its processes, cgroups, rootfs scratch, maybe many files, its disk), then the run dir. Idempotent.
void RunManager::release_box(const std::shared_ptr<Run>& run) {
  run->sandbox.reset();
  std::error_code ignored;
  std::filesystem::remove_all(run->run_dir, ignored);
}

nlohmann::json RunManager::keep_outputs(const std::shared_ptr<Run>& run) {
  RunUppers uppers;
  if (run->submission.spec.cow_workspace()) uppers.workspace = run->run_dir + "/upper";
  if (run->sandbox) {
    uppers.root = run->sandbox->box().rootfs_upper();
    // A proxy run's ~/.m2 is a writable bind of <run_dir>/m2 (run_proxy.h): what Maven fetched belongs to the root.
    for (const auto& mount : run->sandbox->box().environment().mounts) {
      if (mount.source == run->run_dir + "/m2") uppers.root_grafts[mount.target.substr(1)] = mount.source;
    }
  }
  uppers.id_base = launcher_.options().host_id_base;
  uppers.id_count = launcher_.options().host_id_count;
  return options_.outputs->keep(run->id, run->submission.spec.output_globs, uppers, unix_ms());
}

void RunManager::complete_run(const std::shared_ptr<Run>& run, sandbox::Result result) {
  std::string state = sandbox::status_name(result.status);
  nlohmann::json record;
  try {
    RecordSources sources;
    sources.upper_dir = run->run_dir + "/upper";
    if (run->submission.workspace_snapshot) sources.lower_dir = run->submission.workspace_snapshot->tree();
    sources.baseline_run = run->submission.baseline_run;
    if (run->proxy) {
      sources.proxy = run->proxy->record();
      run->proxy.reset();
    }
    for (auto* log : {run->stdout_log.get(), run->stderr_log.get()}) {
      if (log != nullptr) log->close();
    }
    if (run->stdout_log) sources.stdout_digest = run->stdout_log->digest();
    if (run->stderr_log) sources.stderr_digest = run->stderr_log->digest();
    record = build_record(run->submission.spec, result, sources);
    if (options_.outputs) record["outputs"] = keep_outputs(run);
  } catch (const std::exception& e) {
    state = "internal_error";
    record = failure_record(std::string("finishing the run failed: ") + e.what(), result);
  }
  record_finished(run, state, record);
  nlohmann::json run_json = run->row.to_json();
  state = run->row.state;
  // A snapshot it used may be removed once it is done (not under mutex_: the release takes the store's lock).
  run->submission.workspace_snapshot.reset();
  {
    // Before "finished" reaches anyone: a client acting on it (cancel: 409, /metrics) must see the run done.
    std::lock_guard lock(mutex_);
    live_.erase(run->id);
    ++tearing_down_;
    if (run->started) --running_;
    ++stats_.finished_by_status[state];
    if (result.setup.total_ms > 0) {
      stats_.setup_sum_ms += result.setup.total_ms;
      ++stats_.setup_count;
      for (std::size_t i = 0; i <= kSetupBucketsMs.size(); ++i) {
        const bool in_bucket = i == kSetupBucketsMs.size() || result.setup.total_ms <= kSetupBucketsMs[i];
        if (in_bucket) ++stats_.setup_bucket_counts[i];
      }
    }
  }
  try {
    notify(run, {{"event", "finished"}, {"id", run->id}, {"run", std::move(run_json)}});
  } catch (const std::exception& e) {
    spdlog::error("run {}: sending \"finished\" failed: {}", run->id, e.what());
  }
  run->answering.release();
  wake();  // a free slot for the queue
  // After the answer (the record above read the cow upper, which a sandbox disk holds until the box goes): the
  // release happens here, on a finisher thread, and delays neither this run's answer nor the supervision loop.
  release_box(run);
  {
    std::lock_guard lock(mutex_);
    --tearing_down_;
  }
  idle_.notify_all();  // after the answers are on their way and the boxes gone, so drain() waits for both
  wake();              // a stopping loop may now end
}

void RunManager::supervise_loop() {
  std::vector<std::shared_ptr<Run>> active;
  for (;;) {
    try {
      if (!supervise_once(active)) return;
    } catch (const std::exception& e) {
      // A backstop: whatever went wrong is logged and the loop goes on supervising the others.
      spdlog::error("supervision loop: {}", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

bool RunManager::supervise_once(std::vector<std::shared_ptr<Run>>& active) {
  std::vector<std::shared_ptr<Run>> to_start;
  std::vector<std::shared_ptr<Run>> cancelled_in_queue;
  std::vector<std::shared_ptr<Run>> handed_over;
  std::int64_t disk_retry_ns = 0;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && live_.empty() && tearing_down_ == 0) return false;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if ((*it)->cancel_requested) {
        cancelled_in_queue.push_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    disk_retry_ns = start_queued_locked(to_start);
    handed_over.swap(started_);
  }
  for (auto& run : cancelled_in_queue) start_run(run);  // finishes it as cancelled
  for (auto& run : to_start) {
    // A box waiting in the pool costs this thread an exec and no hop; a box to be made goes to a start thread.
    // (A proxy run's box gets its listener at the start: never one from the pool.)
    const bool pooled = !through_proxy(run->submission) && launcher_.has_ready_box(run->sandbox_spec);
    if (pooled) {
      start_run(run);
    } else {
      starter_.post([this, run] { start_run(run); });
    }
  }
  active.insert(active.end(), handed_over.begin(), handed_over.end());

  std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
  std::vector<Run*> owners{nullptr};
  std::int64_t deadline = disk_retry_ns;
  for (auto& run : active) {
    sandbox::Supervisor& supervisor = run->sandbox->supervisor();
    if (run->cancel_requested) supervisor.cancel();
    for (const pollfd& p : supervisor.interest()) {
      fds.push_back(p);
      owners.push_back(run.get());
    }
    std::int64_t d = supervisor.next_deadline();
    if (d != 0 && (deadline == 0 || d < deadline)) deadline = d;
  }
  const std::int64_t now = sandbox::monotonic_ns();
  int timeout_ms = deadline == 0 ? -1 : static_cast<int>(std::max<std::int64_t>(0, (deadline - now) / 1000000 + 1));
  if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) return true;
  if (fds[0].revents != 0) {
    std::uint64_t count;
    (void)!read(wake_fd_, &count, sizeof count);
  }
  std::set<Run*> broken;  // a supervisor that threw: its sandbox is torn down and recorded as an error
  std::map<Run*, std::string> errors;
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0 || broken.count(owners[i])) continue;
    try {
      owners[i]->sandbox->supervisor().handle(fds[i].fd, fds[i].revents);
    } catch (const std::exception& e) {
      broken.insert(owners[i]);
      errors[owners[i]] = e.what();
    }
  }
  const std::int64_t after = sandbox::monotonic_ns();
  for (auto it = active.begin(); it != active.end();) {
    auto run = *it;
    sandbox::Result result;
    try {
      sandbox::Supervisor& supervisor = run->sandbox->supervisor();
      if (!broken.count(run.get())) supervisor.tick(after);
      if (!broken.count(run.get()) && !supervisor.finished()) {
        ++it;
        continue;
      }
      if (broken.count(run.get())) throw std::runtime_error(errors[run.get()]);
      result = run->sandbox->finish();
    } catch (const std::exception& e) {
      result = sandbox::Result{};
      result.status = sandbox::Status::kInternalError;
      result.reason = std::string("supervision failed: ") + e.what();
    }
    it = active.erase(it);
    finish_run(run, std::move(result));
  }
  return true;
}

}  // namespace capsule::daemon

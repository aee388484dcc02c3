// A live run's ndjson event stream as `capsule run` and `capsule session exec` relay it: output events written
// to our stdout/stderr as they come, a watcher that turns the first SIGINT/SIGTERM into one stop request, and
// the end they share with `capsule session attach` (summary line, exit status).
#pragma once

#include <signal.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>

#include "base/unique_fd.h"
#include "http/unix_client.h"

namespace capsule::client {

// While it lives, SIGINT/SIGTERM are held for it (blocked, taken from a signalfd): the first calls `stop(id)` once
// (as soon as the id is known), the second exits this process with kExitStoppedWaiting without waiting. `what`
// names the run in messages ("run", "exec"). A caller that waits on one stream hands watch() to its streaming
// request, which handles the signals between reads on the caller's own thread: no thread to start and join (they
// were 1.6 ms of a 13.7 ms `capsule run -- true`). A caller that blocks elsewhere calls watch_on_a_thread().
class InterruptWatcher {
 public:
  using Stop = std::function<void(const std::string& id)>;
  InterruptWatcher(std::string what, Stop stop);
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  void set_id(const std::string& id);
  // The signalfd and its handler, for HttpClient::stream's poll.
  http::StreamWatch watch();
  // Handles the signals on a thread of its own (asleep in poll() on the signalfd and a wake pipe) until this
  // object goes.
  void watch_on_a_thread();

 private:
  void take_signal();  // one signal from the signalfd: the stop, or the exit
  void stop_locked();

  std::string what_;
  Stop stop_;
  sigset_t signals_{};
  sigset_t old_mask_{};
  base::UniqueFd signal_fd_;
  base::UniqueFd wake_read_, wake_write_;
  std::mutex mutex_;
  std::string id_;
  int signals_taken_ = 0;
  bool requested_ = false;
  std::thread thread_;
};

// Consumes the lines of one run's event stream (docs/api.md: queued/started, stdout/stderr with data_b64,
// dropped, finished {"run"}, error): output is relayed unless `quiet`, the first id seen is handed to `on_id`.
class RunEventRelay {
 public:
  RunEventRelay(bool quiet, std::function<void(const std::string& id)> on_id);
  void on_line(std::string_view line);

  // The finished run object; throws std::runtime_error when the stream ended before it.
  const nlohmann::json& finished_run() const;
  const std::string& id() const { return id_; }
  // Output bytes this client fell too far behind to receive.
  std::uint64_t not_relayed() const { return not_relayed_; }

 private:
  bool quiet_;
  std::function<void(const std::string& id)> on_id_;
  nlohmann::json run_;
  std::string id_;
  std::string stream_error_;
  std::uint64_t not_relayed_ = 0;
};

// The end of `capsule run`, `session exec` and `session attach` for a finished run: the run object (json_output)
// or the summary line on stderr, and run_view's exit status. When `bytes_missing` > 0, what this process printed
// is not the command's whole output: `missing_line` says so on stderr and the status is 125.
int report_run_end(const nlohmann::json& run, bool json_output, std::uint64_t bytes_missing,
                   const std::string& missing_line);
// report_run_end for a relayed event stream: the bytes missing are those the relay fell too far behind to get.
int report_finished(const RunEventRelay& relay, bool json_output);

}  // namespace capsule::client

// The run event relay and interrupt watcher shared by `capsule run` and `capsule session exec`: output events
// are decoded and written without a JSON parse of their large string, anything else is parsed as JSON.
#include "client/run_stream.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "base/base64.h"
#include "client/json_read.h"
#include "client/run_view.h"

namespace capsule::client {
namespace {

using nlohmann::json;

// capsuled writes output events as {"event":"stdout"|"stderr","id":"...","data_b64":"..."} (docs/api.md):
// those are read here without a JSON parse of the large string. Anything else: nullopt (parse it as JSON).
struct OutputEvent {
  bool is_stdout = true;
  std::string_view data_b64;
};
std::optional<OutputEvent> quick_output_event(std::string_view line) {
  OutputEvent out;
  for (const std::string_view prefix : {R"({"event":"stdout","id":")", R"({"event":"stderr","id":")"}) {
    if (!line.starts_with(prefix)) continue;
    out.is_stdout = prefix[13] == 'o';  // std[o]ut, std[e]rr
    const std::size_t field = line.find(R"(","data_b64":")", prefix.size());
    if (field == std::string_view::npos || !line.ends_with("\"}")) return std::nullopt;
    const std::string_view id = line.substr(prefix.size(), field - prefix.size());
    if (id.find_first_of("\"\\") != std::string_view::npos) return std::nullopt;
    const std::size_t start = field + 14;
    if (start > line.size() - 2) return std::nullopt;
    out.data_b64 = line.substr(start, line.size() - 2 - start);
    return out;
  }
  return std::nullopt;
}

void relay_b64(bool is_stdout, std::string_view data_b64) {
  const std::optional<std::string> bytes = base::base64_decode(data_b64);
  if (!bytes) throw std::runtime_error("capsuled sent an output event whose data_b64 is not base64");
  relay_output(is_stdout ? STDOUT_FILENO : STDERR_FILENO, *bytes);
}

}  // namespace

InterruptWatcher::InterruptWatcher(std::string what, Stop stop) : what_(std::move(what)), stop_(std::move(stop)) {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
  signal_fd_ = base::UniqueFd(::signalfd(-1, &signals_, SFD_CLOEXEC));
  if (!signal_fd_) {
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    throw std::runtime_error("cannot watch for interrupts: signalfd failed");
  }
}

InterruptWatcher::~InterruptWatcher() {
  if (thread_.joinable()) {
    const char byte = 0;
    (void)!::write(wake_write_.get(), &byte, 1);
    thread_.join();
  }
  const timespec zero{};
  while (sigtimedwait(&signals_, nullptr, &zero) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

http::StreamWatch InterruptWatcher::watch() {
  return {signal_fd_.get(), [this] { take_signal(); }};
}

void InterruptWatcher::watch_on_a_thread() {
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) throw std::runtime_error("cannot make a pipe to stop the interrupt watcher");
  wake_read_ = base::UniqueFd(wake[0]);
  wake_write_ = base::UniqueFd(wake[1]);
  thread_ = std::thread([this] {
    for (;;) {
      pollfd fds[2] = {{wake_read_.get(), POLLIN, 0}, {signal_fd_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[0].revents != 0) return;
      take_signal();
    }
  });
}

void InterruptWatcher::set_id(const std::string& id) {
  std::lock_guard lock(mutex_);
  id_ = id;
  if (requested_) stop_locked();
}

void InterruptWatcher::take_signal() {
  signalfd_siginfo info{};
  if (::read(signal_fd_.get(), &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return;
  std::lock_guard lock(mutex_);
  if (++signals_taken_ > 1) {
    std::cerr << "capsule: not waiting for " << what_ << " " << id_ << " any longer\n";
    std::_Exit(kExitStoppedWaiting);
  }
  requested_ = true;
  if (!id_.empty()) stop_locked();
}

void InterruptWatcher::stop_locked() {
  try {
    stop_(id_);
  } catch (const std::exception& e) {
    std::cerr << "capsule: stopping " << what_ << " " << id_ << " failed: " << e.what() << "\n";
  }
}

RunEventRelay::RunEventRelay(bool quiet, std::function<void(const std::string& id)> on_id)
    : quiet_(quiet), on_id_(std::move(on_id)) {}

void RunEventRelay::on_line(std::string_view line) {
  if (const auto output = quick_output_event(line)) {
    if (!quiet_) relay_b64(output->is_stdout, output->data_b64);
    return;
  }
  const json event = json::parse(line, nullptr, false);
  const std::string kind = text(event, "event");
  if (id_.empty() && !text(event, "id").empty()) {
    id_ = text(event, "id");
    if (on_id_) on_id_(id_);
  }
  if ((kind == "stdout" || kind == "stderr") && !quiet_) {
    relay_b64(kind == "stdout", text(event, "data_b64"));
  } else if (kind == "dropped" && !quiet_) {
    not_relayed_ += static_cast<std::uint64_t>(number(event, "bytes"));
  } else if (kind == "finished" && !member(event, "run").empty()) {
    run_ = member(event, "run");
  } else if (kind == "error") {
    stream_error_ = text(member(event, "error"), "message");
  }
}

const json& RunEventRelay::finished_run() const {
  if (!run_.is_object()) {
    throw std::runtime_error("the event stream of run " + (id_.empty() ? "?" : id_) + " ended before it finished" +
                             (stream_error_.empty() ? "" : ": " + stream_error_));
  }
  return run_;
}

int report_run_end(const json& run, bool json_output, std::uint64_t bytes_missing, const std::string& missing_line) {
  if (json_output) std::cout << run.dump(2) << "\n";
  else std::cerr << summary_line(run) << "\n";
  RunEnding ending = ending_of(run);
  ending.bytes_not_relayed = bytes_missing;
  // What this process printed is not the command's whole output: never let it pass for it.
  if (bytes_missing > 0) std::cerr << missing_line << "\n";
  return exit_code_for(ending);
}

int report_finished(const RunEventRelay& relay, bool json_output) {
  return report_run_end(relay.finished_run(), json_output, relay.not_relayed(),
                        not_relayed_line(relay.id(), relay.not_relayed()));
}

}  // namespace capsule::client

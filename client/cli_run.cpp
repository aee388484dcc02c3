// `capsule run` over capsuled's ndjson event stream: output events decoded and written as they come, a watcher
// thread that turns the first SIGINT/SIGTERM into a cancel, and the finished run handed to run_view.
#include "client/cli_run.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>

#include "base/base64.h"
#include "client/cli_daemon.h"
#include "client/cli_runs.h"
#include "client/json_read.h"
#include "client/run_view.h"
#include "http/unix_client.h"

namespace capsule::client {
namespace {

using nlohmann::json;

// While a run streams, SIGINT/SIGTERM are taken by this watcher thread: the first cancels the run once (as soon
// as its id is known), the second exits without waiting.
class InterruptWatcher {
 public:
  explicit InterruptWatcher(const http::HttpClient& client) : client_(client) {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
    thread_ = std::thread([this] { loop(); });
  }
  ~InterruptWatcher() {
    stop_ = true;
    thread_.join();
    const timespec zero{};
    while (sigtimedwait(&signals_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  void set_id(const std::string& id) {
    std::lock_guard lock(mutex_);
    id_ = id;
    if (requested_) cancel_locked();
  }

 private:
  void loop() {
    int count = 0;
    while (!stop_) {
      const timespec tick{0, 100'000'000};
      if (sigtimedwait(&signals_, nullptr, &tick) < 0) continue;
      if (++count > 1) {
        std::lock_guard lock(mutex_);
        std::cerr << "capsule: not waiting for run " << id_ << " any longer\n";
        std::_Exit(kExitStoppedWaiting);
      }
      std::lock_guard lock(mutex_);
      requested_ = true;
      if (!id_.empty()) cancel_locked();
    }
  }

  void cancel_locked() {
    std::cerr << "capsule: cancelling run " << id_ << " (interrupt again to stop waiting)\n";
    try {
      const http::HttpResponse response = client_.request("POST", run_path(id_) + "/cancel");
      if (response.status != 409) http::throw_if_error(response);
    } catch (const std::exception& e) {
      std::cerr << "capsule: cancel failed: " << e.what() << "\n";
    }
  }

  const http::HttpClient& client_;
  sigset_t signals_{};
  sigset_t old_mask_{};
  std::mutex mutex_;
  std::string id_;
  bool requested_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

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

}  // namespace

json build_run_body(const RunOptions& o) {
  if (o.argv.empty()) throw std::invalid_argument("no command given: put it after --, e.g. capsule run -- make test");
  json body = {{"argv", o.argv}};
  if (!o.image.empty()) body["image"] = o.image;
  json env = json::object();
  for (const auto& [key, value] : env_assignments(o.env)) env[key] = value;
  if (!env.empty()) body["env"] = env;
  json labels = json::object();
  for (const auto& item : o.labels) {
    const auto [key, value] = split_pair(item, "--label");
    labels[key] = value;
  }
  if (!labels.empty()) body["labels"] = labels;
  json toolchains = json::object();
  for (const auto& item : o.toolchains) {
    const auto [key, value] = split_pair(item, "--toolchain");
    toolchains[key] = value;
  }
  if (!toolchains.empty()) body["toolchains"] = toolchains;
  if (!o.as_of.empty()) body["as_of"] = o.as_of;
  if (!o.workdir.empty()) body["cwd"] = o.workdir;
  if (!o.workspace.empty()) {
    body["workspace"] = {{"path", absolute_dir(o.workspace)}};
    if (!o.mode.empty()) body["workspace"]["mode"] = o.mode;
  } else if (!o.mode.empty()) {
    throw std::invalid_argument("--mode needs --workspace");
  }
  json limits = json::object();
  if (!o.timeout.empty()) limits["wall_time"] = o.timeout;
  if (!o.cpu_time.empty()) limits["cpu_time"] = o.cpu_time;
  if (!o.memory.empty()) limits["memory"] = o.memory;
  if (o.cpus) limits["cpus"] = *o.cpus;
  if (o.pids) limits["pids"] = *o.pids;
  if (!limits.empty()) body["limits"] = limits;
  if (!o.network.empty()) body["network"] = o.network;
  if (!o.policy.empty()) body["policy"] = o.policy;
  if (!o.junit.empty()) body["collect"] = {{"junit", o.junit}};
  if (o.stdin_data) body["stdin"] = *o.stdin_data;
  return body;
}

int cmd_run(const std::string& socket, RunOptions options) {
  if (options.interactive) {
    options.stdin_data = std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  const json body = build_run_body(options);
  const http::HttpClient client(socket);
  ensure_daemon(client);
  if (options.detach) {
    std::cout << id_of(http::request_json(client, "POST", "/v1/runs", body)) << "\n";
    return 0;
  }
  InterruptWatcher watcher(client);
  json run;
  std::string id, stream_error;
  std::uint64_t not_relayed = 0;  // output bytes this client fell too far behind to receive
  const http::HttpResponse response = client.stream_lines(
      "POST", "/v1/runs", body, {{"Accept", "application/x-ndjson"}}, [&](std::string_view line) {
        if (const auto output = quick_output_event(line)) {
          if (options.json) return;
          const std::optional<std::string> bytes = base::base64_decode(output->data_b64);
          if (!bytes) throw std::runtime_error("capsuled sent an output event whose data_b64 is not base64");
          relay_output(output->is_stdout ? STDOUT_FILENO : STDERR_FILENO, *bytes);
          return;
        }
        const json event = json::parse(line, nullptr, false);
        const std::string kind = text(event, "event");
        if (kind == "queued") {
          id = text(event, "id");
          watcher.set_id(id);
        } else if ((kind == "stdout" || kind == "stderr") && !options.json) {
          const std::optional<std::string> bytes = base::base64_decode(text(event, "data_b64"));
          if (!bytes) throw std::runtime_error("capsuled sent a " + kind + " event whose data_b64 is not base64");
          relay_output(kind == "stdout" ? STDOUT_FILENO : STDERR_FILENO, *bytes);
        } else if (kind == "dropped" && !options.json) {
          not_relayed += static_cast<std::uint64_t>(number(event, "bytes"));
        } else if (kind == "finished" && !member(event, "run").empty()) {
          run = member(event, "run");
        } else if (kind == "error") {
          stream_error = text(member(event, "error"), "message");
        }
      });
  http::throw_if_error(response);
  if (!run.is_object()) {
    throw std::runtime_error("the event stream of run " + (id.empty() ? "?" : id) + " ended before it finished" +
                             (stream_error.empty() ? "" : ": " + stream_error));
  }
  if (options.json) std::cout << run.dump(2) << "\n";
  else std::cerr << summary_line(run) << "\n";
  RunEnding ending = ending_of(run);
  ending.bytes_not_relayed = not_relayed;
  // What this process printed is not the command's whole output: never let it pass for it.
  if (not_relayed > 0) std::cerr << not_relayed_line(id, not_relayed) << "\n";
  return exit_code_for(ending);
}

}  // namespace capsule::client

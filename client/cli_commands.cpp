// The capsule subcommands over capsuled's API: the RunSpec body builder, the live ndjson run stream with
// Ctrl-C cancellation, daemon auto-start, run listing and the docker-like exit status of `capsule run`.
#include "client/cli_commands.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/base64.h"
#include "http/unix_client.h"

#ifndef CAPSULE_VERSION
#define CAPSULE_VERSION "unknown"
#endif

extern char** environ;

namespace capsule::client {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::int64_t number(const json& object, const char* key, std::int64_t fallback = 0) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return fallback;
  return object[key].get<std::int64_t>();
}

std::string text(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || object[key].is_null()) return "";
  return object[key].is_string() ? object[key].get<std::string>() : object[key].dump();
}

const json& member(const json& object, const char* key) {
  static const json empty = json::object();
  return object.is_object() && object.contains(key) && object[key].is_object() ? object[key] : empty;
}

std::pair<std::string, std::string> split_pair(const std::string& item, const char* flag) {
  const auto equals = item.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw std::invalid_argument(std::string(flag) + " '" + item + "': expected KEY=VALUE");
  }
  return {item.substr(0, equals), item.substr(equals + 1)};
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string short_duration(std::int64_t ms) {
  if (ms < 60000) return fixed(static_cast<double>(ms) / 1000.0, 2) + "s";
  char buffer[64];
  if (ms < 3600000) std::snprintf(buffer, sizeof buffer, "%dm%02ds", int(ms / 60000), int(ms / 1000 % 60));
  else std::snprintf(buffer, sizeof buffer, "%dh%02dm", int(ms / 3600000), int(ms / 60000 % 60));
  return buffer;
}

std::string age(std::int64_t ms) {
  const std::int64_t s = std::max<std::int64_t>(ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s ago";
  if (s < 3600) return std::to_string(s / 60) + "m ago";
  if (s < 86400) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

std::string shell_quote(const std::string& arg) {
  const bool plain = !arg.empty() && arg.find_first_not_of(
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,@%+-") == std::string::npos;
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_text(const json& run) {
  std::string out;
  const json& argv = member(run, "spec").value("argv", json::array());
  for (const auto& arg : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(arg.is_string() ? arg.get<std::string>() : arg.dump());
  }
  return out.size() > 48 ? out.substr(0, 45) + "..." : out;
}

bool is_live(const std::string& state) { return state == "queued" || state == "running"; }

std::string run_path(const std::string& id) { return "/v1/runs/" + http::url_encode(id); }

std::string file_tail(const std::string& path, std::size_t bytes) {
  std::ifstream file(path, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return content.size() > bytes ? content.substr(content.size() - bytes) : content;
}

void make_parent_dir(const std::string& path) {
  std::error_code ignored;  // the daemon reports a socket directory it cannot use
  fs::create_directories(fs::path(path).parent_path(), ignored);
}

// Starts capsuled detached (own session, stdio to a log in its state dir) and waits until it answers.
void start_daemon(const http::HttpClient& client) {
  const std::string binary = capsuled_path();
  if (::access(binary.c_str(), X_OK) != 0) {
    throw std::runtime_error("no daemon answers at " + client.socket_path() + " and capsuled cannot be started: " +
                             binary + ": " + std::strerror(errno));
  }
  const std::string state_dir = default_state_dir();
  fs::create_directories(state_dir);
  make_parent_dir(client.socket_path());
  const std::string log = state_dir + "/capsuled.log";
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log_fd < 0) throw std::runtime_error("cannot open " + log + ": " + std::strerror(errno));

  std::vector<std::string> args = {binary, "--socket", client.socket_path(), "--state-dir", state_dir, "--foreground"};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, binary.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(log_fd);
  if (error != 0) throw std::runtime_error("cannot start " + binary + ": " + std::strerror(error));

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string last_error;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      throw std::runtime_error("capsuled exited (status " + std::to_string(status) + ") before answering on " +
                               client.socket_path() + "; the end of " + log + ":\n" + file_tail(log, 600));
    }
    try {
      if (client.request("GET", "/v1/health").status == 200) break;
      last_error = "/v1/health did not answer 200";
    } catch (const std::runtime_error& e) {
      last_error = e.what();
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("capsuled (pid " + std::to_string(pid) + ") did not answer within 10 s (" + last_error +
                               "); see " + log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::cerr << "capsule: started capsuled (pid " << pid << ", socket " << client.socket_path() << ", log " << log
            << ")\n";
}

void ensure_daemon(const http::HttpClient& client) {
  try {
    client.request("GET", "/v1/health");
    return;
  } catch (const http::ConnectError& e) {
    if (!e.nobody_listening()) throw;
  }
  start_daemon(client);
}

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
        std::_Exit(130);
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

const char* client_version() { return CAPSULE_VERSION; }

const char* const kExitCodeHelp =
    "Exit status of `capsule run`: the command's own exit status; 124 when it hit the wall-time limit\n"
    "(--timeout); 137 when it was OOM-killed, cancelled or killed by SIGKILL; 128+N when killed by signal N;\n"
    "126/127 when the command could not be executed/found; 125 when the sandbox could not be set up, the\n"
    "daemon failed or rejected the request, the flags are wrong, or this client fell so far behind the\n"
    "command's output that some was not relayed (`capsule runs logs ID` has it all). Other subcommands exit 1 on errors and\n"
    "2 on usage errors.";

void add_run_flags(CLI::App& command, RunOptions& o) {
  command.add_option("image", o.image, "image to run in (default: the daemon's, \"host\")");
  command.add_option("--workspace", o.workspace, "host directory mounted at /workspace");
  command.add_option("--mode", o.mode, "workspace mode: cow (changes stay in the run, default), ro, rw");
  command.add_option("--workdir,-w", o.workdir, "working directory inside the sandbox");
  command.add_option("--timeout", o.timeout, "wall-clock limit, e.g. 90s, 10m");
  command.add_option("--cpu-time", o.cpu_time, "CPU time limit of the whole sandbox, e.g. 5m");
  command.add_option("--memory,-m", o.memory, "memory limit, e.g. 512m, 4g");
  command.add_option("--cpus", o.cpus, "CPU bandwidth in cores");
  command.add_option("--pids", o.pids, "maximum number of processes");
  command.add_option("--env,-e", o.env, "environment variable K=V (K alone copies it from here)")->allow_extra_args(false);
  command.add_option("--label,-l", o.labels, "label K=V (filter with `runs ls --label`)")->allow_extra_args(false);
  command.add_option("--junit", o.junit, "JUnit XML glob in the workspace, counted into the record")
      ->allow_extra_args(false);
  command.add_option("--toolchain,-t", o.toolchains, "pick the image by toolchain: java=17, python=3.11, python=auto")
      ->allow_extra_args(false);
  command.add_option("--as-of", o.as_of, "date (YYYY-MM-DD) that python=auto is chosen for, and that --network proxy shows packages as of");
  command.add_option("--network", o.network, "none (loopback only) or proxy (also the date-masked PyPI/Maven proxy on 127.0.0.1:3141; needs --as-of)");
  command.add_option("--policy", o.policy, "seccomp policy name");
  command.add_flag("--interactive,-i", o.interactive, "send this process's stdin to the command");
  command.add_flag("--json", o.json, "print the finished run object instead of the command's output");
  command.add_flag("--detach,-d", o.detach, "submit the run, print its id and return");
}

json build_run_body(const RunOptions& o) {
  if (o.argv.empty()) throw std::invalid_argument("no command given: put it after --, e.g. capsule run -- make test");
  json body = {{"argv", o.argv}};
  if (!o.image.empty()) body["image"] = o.image;
  json env = json::object();
  for (const auto& item : o.env) {
    if (item.find('=') == std::string::npos && !item.empty()) {
      if (const char* value = std::getenv(item.c_str())) env[item] = value;
      continue;
    }
    const auto [key, value] = split_pair(item, "--env");
    env[key] = value;
  }
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
    std::string path = fs::absolute(o.workspace).lexically_normal().string();
    if (path.size() > 1 && path.back() == '/') path.pop_back();
    body["workspace"] = {{"path", path}};
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

int exit_code_for(const json& run) {
  const std::string state = text(run, "state");
  const json& record = member(run, "record");
  const auto code = static_cast<int>(number(record, "exit_code"));
  if (state == "succeeded") return code;
  if (state == "failed") return code != 0 ? code : 1;
  if (state == "timed_out") return 124;
  if (state == "oom_killed" || state == "cancelled") return 137;
  if (state == "signaled") {
    const auto signal = number(record, "signal");
    return signal > 0 && signal < 128 ? 128 + static_cast<int>(signal) : kRunErrorExit;
  }
  if (state == "setup_failed" && (code == 126 || code == 127)) return code;
  return kRunErrorExit;
}

std::string summary_line(const json& run) {
  const std::string state = text(run, "state");
  const json& record = member(run, "record");
  std::string line = "capsule: run " + text(run, "id") + " " + state + " in " +
                     fixed(static_cast<double>(number(record, "wall_ms")) / 1000.0, 2) + " s";
  const std::string reason = text(record, "reason");
  if (state != "succeeded" && state != "failed" && !reason.empty()) line += ": " + reason;
  line += " (exit " + std::to_string(exit_code_for(run));
  const json& tests = member(record, "tests");
  if (number(tests, "total") > 0) {
    line += "; tests: " + std::to_string(number(tests, "total")) + " total, " + std::to_string(number(tests, "failed")) +
            " failed, " + std::to_string(number(tests, "errors")) + " errors, " +
            std::to_string(number(tests, "skipped")) + " skipped";
  }
  return line + ")";
}

std::string format_runs_table(const json& runs, std::int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {{"ID", "STATE", "EXIT", "WALL", "CREATED", "COMMAND"}};
  for (const auto& run : runs) {
    const std::string state = text(run, "state");
    const json& record = member(run, "record");
    std::string wall = "-";
    if (record.contains("wall_ms")) wall = short_duration(number(record, "wall_ms"));
    else if (state == "running" && number(run, "started_ms") > 0) wall = short_duration(now_ms - number(run, "started_ms"));
    rows.push_back({text(run, "id"), state, is_live(state) ? "-" : std::to_string(exit_code_for(run)), wall,
                    age(now_ms - number(run, "created_ms")), command_text(run)});
  }
  return format_columns(rows);
}

std::string format_columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string default_socket_path() {
  if (::geteuid() == 0) return "/run/capsule/capsule.sock";
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && *runtime) return std::string(runtime) + "/capsule/capsule.sock";
  return "/tmp/capsule-" + std::to_string(::geteuid()) + "/capsule.sock";
}

std::string default_state_dir() {
  const char* configured = std::getenv("CAPSULE_STATE_DIR");
  if (configured && *configured) return configured;
  if (::geteuid() == 0) return "/var/lib/capsule";
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state && *state) return std::string(state) + "/capsule";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/state/capsule";
  return "/tmp/capsule-" + std::to_string(::geteuid()) + "/state";
}

std::string capsuled_path() { return (fs::read_symlink("/proc/self/exe").parent_path() / "capsuled").string(); }

int cmd_run(const std::string& socket, RunOptions options) {
  if (options.interactive) {
    options.stdin_data = std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  const json body = build_run_body(options);
  const http::HttpClient client(socket);
  ensure_daemon(client);
  if (options.detach) {
    std::cout << text(http::request_json(client, "POST", "/v1/runs", body), "id") << "\n";
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
          write_all(output->is_stdout ? STDOUT_FILENO : STDERR_FILENO, *bytes);
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
          write_all(kind == "stdout" ? STDOUT_FILENO : STDERR_FILENO, *bytes);
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
  if (not_relayed > 0) {
    // What this process printed is not the command's whole output: never let it pass for it.
    std::cerr << "capsule: " << not_relayed << " bytes of the command's output were not relayed (this client fell "
              << "behind the command); `capsule runs logs " << id << "` has all of it\n";
    return kRunErrorExit;
  }
  return exit_code_for(run);
}

int cmd_runs_ls(const std::string& socket, const std::string& state, const std::string& label,
                std::optional<int> limit, const std::string& after, bool json_output) {
  std::string target = "/v1/runs";
  char separator = '?';
  const auto add = [&](const std::string& name, const std::string& value) {
    if (value.empty()) return;
    target += separator + name + "=" + http::url_encode(value);
    separator = '&';
  };
  add("state", state);
  add("label", label);
  add("limit", limit ? std::to_string(*limit) : "");
  add("after", after);
  const json page = http::request_json(http::HttpClient(socket), "GET", target);
  if (json_output) {
    std::cout << page.dump(2) << "\n";
    return 0;
  }
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  std::cout << format_runs_table(page.value("runs", json::array()), now);
  if (page.contains("next") && page["next"].is_string()) {
    std::cerr << "capsule: more runs: capsule runs ls --after " << page["next"].get<std::string>() << "\n";
  }
  return 0;
}

int cmd_runs_show(const std::string& socket, const std::string& id) {
  std::cout << http::request_json(http::HttpClient(socket), "GET", run_path(id)).dump(2) << "\n";
  return 0;
}

int cmd_runs_logs(const std::string& socket, const std::string& id, bool stderr_stream, bool follow) {
  const std::string target =
      run_path(id) + "/logs?stream=" + (stderr_stream ? "stderr" : "stdout") + (follow ? "&follow=true" : "");
  const http::HttpResponse response = http::HttpClient(socket).stream(
      "GET", target, nullptr, {}, [](std::string_view data) { write_all(STDOUT_FILENO, data); });
  http::throw_if_error(response);
  return 0;
}

int cmd_runs_rm(const std::string& socket, const std::vector<std::string>& ids) {
  const http::HttpClient client(socket);
  int status = 0;
  for (const std::string& id : ids) {
    try {
      http::throw_if_error(client.request("DELETE", run_path(id)));
      std::cout << id << "\n";
    } catch (const http::ResponseError& e) {
      std::cerr << "capsule: runs rm " << id << ": " << e.what() << "\n";
      status = 1;
    }
  }
  return status;
}

int cmd_runs_cancel(const std::string& socket, const std::string& id) {
  http::request_json(http::HttpClient(socket), "POST", run_path(id) + "/cancel");
  std::cout << id << "\n";
  return 0;
}

int cmd_version(const std::string& socket) {
  std::cout << "capsule " << client_version() << "\n";
  const json version = http::request_json(http::HttpClient(socket), "GET", "/v1/version");
  std::string features;
  const json listed = version.value("features", json::array());
  for (const auto& [key, value] : listed.items()) {
    std::string name = listed.is_object() ? key : value.is_string() ? value.get<std::string>() : value.dump();
    if (listed.is_object() && value != true) name += "=" + (value.is_string() ? value.get<std::string>() : value.dump());
    if (!listed.is_object() || value != false) features += (features.empty() ? "" : ", ") + name;
  }
  std::string cgroup = text(version, "cgroup_version");
  if (!cgroup.empty() && cgroup[0] != 'v') cgroup = "v" + cgroup;
  std::cout << "capsuled " << text(version, "version") << " (api " << text(version, "api") << ", kernel "
            << text(version, "kernel") << ", cgroup " << cgroup
            << (features.empty() ? "" : ", features: " + features) << ") at " << socket << "\n";
  return 0;
}

int cmd_daemon(const std::string& socket, const std::string& state_dir) {
  const std::string binary = capsuled_path();
  fs::create_directories(state_dir);
  make_parent_dir(socket);
  std::vector<std::string> args = {binary, "--socket", socket, "--state-dir", state_dir, "--foreground"};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  throw std::runtime_error("cannot run " + binary + ": " + std::strerror(errno));
}

}  // namespace capsule::client

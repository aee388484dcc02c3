// API benchmark: a real capsuled on a temporary state dir; POST /v1/runs?wait=true round trips for `true` vs. bwrap,
// throughput with concurrent clients vs. bwrap, and the daemon's RSS over many runs. Prints a table and one JSON line.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/unix_client.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr double kTargetLatencyRatio = 0.6;  // API p50 at most this fraction of bwrap's p50
constexpr double kTargetThroughput = 300;    // sandboxes per second
constexpr int kRssWarmupRuns = 1000;

struct Options {
  int rounds = 200;
  int warmup = 10;
  int throughput_runs = 2000;
  int runs_for_rss = 10000;
  int clients = 16;
  std::string capsuled;  // empty: capsuled next to this binary
  std::string bwrap;     // empty: bwrap on PATH
  std::string tmp_parent = "/tmp";  // where the daemon's socket and state dir go (its file system matters)
  bool keep_tmp = false;
};

std::function<void()> g_cleanup;  // stops the daemon and removes the temp dir; also on die()

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "api_roundtrip: %s\n", message.c_str());
  if (auto cleanup = std::exchange(g_cleanup, nullptr)) cleanup();
  std::exit(1);
}

std::string join(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : " ") + word;
  return text;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---- statistics ----

double percentile(std::vector<double> values, double p) {  // nearest rank
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}
double median(const std::vector<double>& values) { return percentile(values, 50); }

// ---- /proc readings ----

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// "<fstype> <options>" of the mount holding `path` (the longest matching mount point in /proc/mounts).
std::string mount_of(const std::string& path) {
  std::ifstream file("/proc/mounts");
  std::string best_dir, best;
  for (std::string device, dir, type, options, rest; file >> device >> dir >> type >> options && std::getline(file, rest);) {
    const bool under = path == dir || dir == "/" || path.rfind(dir + "/", 0) == 0;
    if (under && dir.size() >= best_dir.size()) {
      best_dir = dir;
      best = type + " " + options + " (" + device + " on " + dir + ")";
    }
  }
  return best;
}

// VmRSS, RssAnon, RssFile (kB) and Threads of a process.
std::map<std::string, long> proc_status(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/status");
  std::map<std::string, long> values;
  for (std::string line; std::getline(file, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    if (key == "VmRSS" || key == "RssAnon" || key == "RssFile" || key == "Threads") {
      values[key] = std::strtol(line.c_str() + colon + 1, nullptr, 10);
    }
  }
  if (!values.count("VmRSS")) die("cannot read VmRSS of pid " + std::to_string(pid));
  return values;
}

// utime + stime (clock ticks) of every thread of a process.
std::map<int, long> thread_cpu_ticks(pid_t pid) {
  std::map<int, long> ticks;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string text = read_file(entry.path() / "stat");
    const auto paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(text.substr(paren + 2));  // field 3 (state) onwards
    std::vector<std::string> f((std::istream_iterator<std::string>(fields)), std::istream_iterator<std::string>());
    if (f.size() > 12) ticks[std::stoi(entry.path().filename())] = std::stol(f[11]) + std::stol(f[12]);
  }
  return ticks;
}

// CPU time (ms) of a process plus its reaped children: for capsuled that includes every finished sandbox.
double process_tree_cpu_ms(pid_t pid) {
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) die("cannot read /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(text.substr(paren + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)), std::istream_iterator<std::string>());
  if (f.size() < 15) die("short /proc/" + std::to_string(pid) + "/stat");
  const double ticks = std::stod(f[11]) + std::stod(f[12]) + std::stod(f[13]) + std::stod(f[14]);  // u, s, cu, cs
  return ticks * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU time (ms) of this process's reaped children (the bwrap runs) or of this process itself.
double rusage_ms(int who) {
  rusage usage{};
  getrusage(who, &usage);
  auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1000.0 + static_cast<double>(t.tv_usec) / 1000.0; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// Busy and total jiffies of the whole machine (first line of /proc/stat).
std::pair<long long, long long> machine_cpu() {
  std::ifstream file("/proc/stat");
  std::string cpu;
  long long user, nice, system, idle, iowait, irq, softirq, steal;
  file >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const long long busy = user + nice + system + irq + softirq + steal;
  return {busy, busy + idle + iowait};
}

// Regular files (symlinks not followed) and their bytes under a directory: the logs grow with every run.
std::pair<long, long long> dir_usage(const fs::path& dir) {
  long files = 0;
  long long bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->symlink_status(ec).type() == fs::file_type::regular) {
      ++files;
      bytes += static_cast<long long>(it->file_size(ec));
    }
  }
  return {files, bytes};
}

// Bytes of the SQLite ledger with its WAL and shared-memory files.
long long ledger_bytes(const std::string& db) {
  long long bytes = 0;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    const auto size = fs::file_size(db + suffix, ec);
    if (!ec) bytes += static_cast<long long>(size);
  }
  return bytes;
}

// ---- bwrap: posix_spawn + waitpid, stdin/stdout on /dev/null; safe to call from several threads ----

std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) return dir + "/" + name;
  }
  die(name + " not found on PATH");
}

class Spawner {
 public:
  explicit Spawner(std::vector<std::string> argv) : argv_(std::move(argv)) {
    for (auto& arg : argv_) ptrs_.push_back(arg.data());
    ptrs_.push_back(nullptr);
    posix_spawn_file_actions_init(&actions_);
    posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions_, 1, "/dev/null", O_WRONLY, 0);
  }
  ~Spawner() { posix_spawn_file_actions_destroy(&actions_); }
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  void run() const {  // throws unless the command exited 0
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, ptrs_[0], &actions_, nullptr, ptrs_.data(), environ);
    if (rc != 0) throw std::runtime_error(describe() + ": posix_spawn: " + std::strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) throw std::runtime_error(describe() + ": waitpid: " + std::strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error(describe() + ": failed");
  }
  std::string describe() const { return join(argv_); }

 private:
  std::vector<std::string> argv_;
  std::vector<char*> ptrs_;
  posix_spawn_file_actions_t actions_;
};

// ---- the daemon ----

class Daemon {
 public:
  Daemon(const std::string& binary, const std::string& dir)
      : socket_(dir + "/s.sock"), log_(dir + "/capsuled.log") {
    const std::vector<std::string> args = {binary, "--socket", socket_, "--state-dir", dir + "/state",
                                           "--max-concurrent", "16", "--max-queue", "4096"};
    command_ = args;
    pid_ = fork();
    if (pid_ < 0) die(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {  // the daemon gets SIGTERM (and drains) if the benchmark dies
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  // Polls GET /v1/health until it answers 200; dies if the daemon exits or 30 s pass.
  double wait_healthy() {
    const auto start = Clock::now();
    capsule::http::HttpClient client(socket_);
    for (;;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        die("capsuled exited during start-up; its log:\n" + log_tail());
      }
      try {
        if (client.request("GET", "/v1/health").status == 200) return ms_since(start);
      } catch (const std::exception&) {
        // not listening yet
      }
      if (ms_since(start) > 30000) die("capsuled did not answer /v1/health within 30 s; its log:\n" + log_tail());
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // SIGTERM, then waits (SIGKILL after 60 s). Returns a description of how it ended.
  std::string stop() {
    if (pid_ <= 0) return "not running";
    kill(pid_, SIGTERM);
    const auto start = Clock::now();
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (ms_since(start) > 60000) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    char text[96];
    if (WIFEXITED(status)) std::snprintf(text, sizeof text, "exited %d after %.0f ms", WEXITSTATUS(status), ms_since(start));
    else std::snprintf(text, sizeof text, "killed by signal %d", WTERMSIG(status));
    return text;
  }

  std::string log_tail() const {
    const std::string text = read_file(log_);
    return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
  }
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  std::string describe() const { return join(command_); }

 private:
  std::string socket_;
  std::string log_;
  std::vector<std::string> command_;
  pid_t pid_ = -1;
};

// One POST /v1/runs?wait=true of `true` on a new connection (as the CLI does); returns the run row.
json capsule_true(const capsule::http::HttpClient& client) {
  static const json body = {{"argv", {"true"}}};
  const auto response = client.request("POST", "/v1/runs?wait=true", body);
  if (response.status != 200) throw std::runtime_error("POST /v1/runs?wait=true: " + std::to_string(response.status) + " " + response.body);
  json row = json::parse(response.body);
  if (row.value("state", "") != "succeeded" || row["result"].value("exit_code", -1) != 0) {
    throw std::runtime_error("run did not succeed: " + response.body.substr(0, 2000));
  }
  return row;
}

// Runs `total` calls of `one(index)` from `clients` threads; returns seconds and per-call latencies (ms).
struct Load {
  double seconds = 0;
  std::vector<double> latency_ms;
};
Load run_load(int clients, int total, const std::function<void(int)>& one) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::string error;
  Load load;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      for (int i; !failed && (i = next++) < total;) {
        const auto t0 = Clock::now();
        try {
          one(i);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex);
          if (!failed.exchange(true)) error = e.what();
          break;
        }
        mine.push_back(ms_since(t0));
      }
      std::lock_guard lock(mutex);
      load.latency_ms.insert(load.latency_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  load.seconds = ms_since(start) / 1000;
  if (failed) die(error);
  return load;
}

// Runs `true` through the daemon `count` times from `clients` threads, no measurement kept.
void capsule_batch(const capsule::http::HttpClient& client, int clients, int count) {
  if (count > 0) run_load(clients, count, [&](int) { capsule_true(client); });
}

json rss_json(const std::map<std::string, long>& s, long runs) {
  return {{"runs", runs}, {"vm_rss_kb", s.at("VmRSS")}, {"rss_anon_kb", s.count("RssAnon") ? s.at("RssAnon") : 0},
          {"rss_file_kb", s.count("RssFile") ? s.at("RssFile") : 0}, {"threads", s.count("Threads") ? s.at("Threads") : 0}};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"api_roundtrip: capsuled API round trip, throughput and RSS, side by side with bwrap"};
  app.add_option("--rounds", o.rounds, "measured round trips per method (interleaved)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "unmeasured round trips per method first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--throughput-runs", o.throughput_runs, "runs per method in the throughput phase")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--runs-for-rss", o.runs_for_rss, "daemon runs in total before the last RSS reading")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--clients", o.clients, "client threads in the throughput and RSS phases")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--capsuled", o.capsuled, "capsuled binary (default: next to this one)");
  app.add_option("--bwrap", o.bwrap, "bwrap binary (default: on PATH)");
  app.add_option("--tmp-parent", o.tmp_parent, "directory for the temporary socket + state dir")->capture_default_str();
  app.add_flag("--keep-tmp", o.keep_tmp, "keep the temporary state dir (and the daemon log)");
  CLI11_PARSE(app, argc, argv);

  if (o.capsuled.empty()) {
    std::error_code ec;
    o.capsuled = (fs::read_symlink("/proc/self/exe", ec).parent_path() / "capsuled").string();
  }
  if (access(o.capsuled.c_str(), X_OK) != 0) die("no capsuled at " + o.capsuled + " (build the capsuled target)");
  if (o.bwrap.empty()) o.bwrap = find_program("bwrap");

  std::string tmp = o.tmp_parent + "/capsule-api-XXXXXX";
  if (mkdtemp(tmp.data()) == nullptr) die("mkdtemp in " + o.tmp_parent + ": " + std::strerror(errno));
  chmod(tmp.c_str(), 0711);  // sandboxes run as unprivileged ids and walk into <tmp>/state/scratch

  Daemon daemon(o.capsuled, tmp);
  g_cleanup = [&] {
    std::fprintf(stderr, "api_roundtrip: capsuled %s\n", daemon.stop().c_str());
    std::error_code ec;
    if (!o.keep_tmp) fs::remove_all(tmp, ec);
  };
  const double startup_ms = daemon.wait_healthy();
  const capsule::http::HttpClient client(daemon.socket());
  long runs_done = 0;

  const Spawner bwrap({o.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr", "--symlink",
                       "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc",
                       "/proc", "--dev", "/dev", "--", "/usr/bin/true"});
  std::printf("api_roundtrip: capsuled pid %d, answering /v1/health %.0f ms after start\n", daemon.pid(), startup_ms);
  const std::string state_mount = mount_of(tmp);
  std::printf("daemon: %s\n", daemon.describe().c_str());
  std::printf("state dir file system: %s\n", state_mount.c_str());
  std::printf("client: client/http_client.h http::HttpClient, one connection per request (it sends Connection: close)\n");
  std::printf("capsule: POST /v1/runs?wait=true {\"argv\":[\"true\"]} (host image, default policy and limits)\n");
  std::printf("bwrap:   %s (posix_spawn + waitpid)\n", bwrap.describe().c_str());
  const std::string load_before = load_average();
  std::printf("load average before: %s\n\n", load_before.c_str());
  std::fflush(stdout);

  // 1. RSS when idle after start, then after a warm-up of kRssWarmupRuns runs.
  std::vector<json> rss_series;
  auto sample_rss = [&] {
    rss_series.push_back(rss_json(proc_status(daemon.pid()), runs_done));
    return rss_series.back();
  };
  const json rss_idle = sample_rss();
  const int warmup_runs = std::min(kRssWarmupRuns, o.runs_for_rss);
  capsule_batch(client, o.clients, warmup_runs);
  runs_done += warmup_runs;
  const json rss_warm = sample_rss();
  std::printf("[rss] idle %ld kB, after %ld runs %ld kB\n", rss_idle["vm_rss_kb"].get<long>(), runs_done,
              rss_warm["vm_rss_kb"].get<long>());
  std::fflush(stdout);

  // 2. Round trips, one at a time, capsule and bwrap alternating (order swapped every round).
  std::vector<double> capsule_ms, bwrap_ms, record_wall_ms, outside_ms, queue_ms;
  std::map<std::string, std::vector<double>> setup;
  for (int round = 0; round < o.warmup + o.rounds; ++round) {
    const bool measured = round >= o.warmup;
    for (int k = 0; k < 2; ++k) {
      if ((k + round) % 2 == 0) {
        const auto t0 = Clock::now();
        json row;
        try {
          row = capsule_true(client);
        } catch (const std::exception& e) {
          die(e.what());
        }
        const double ms = ms_since(t0);
        ++runs_done;
        if (!measured) continue;
        capsule_ms.push_back(ms);
        const json& record = row["result"];
        record_wall_ms.push_back(record.value("wall_ms", 0.0));
        outside_ms.push_back(ms - record.value("wall_ms", 0.0));
        queue_ms.push_back(static_cast<double>(row["times"].value("started", 0L) - row["times"].value("created", 0L)));
        for (const auto& [step, value] : record["setup_ms"].items()) setup[step].push_back(value.get<double>());
      } else {
        const auto t0 = Clock::now();
        try {
          bwrap.run();
        } catch (const std::exception& e) {
          die(e.what());
        }
        if (measured) bwrap_ms.push_back(ms_since(t0));
      }
    }
  }
  const double ratio = median(capsule_ms) / median(bwrap_ms);
  std::printf("[round trip] %d measured + %d warm-up per method\n", o.rounds, o.warmup);
  std::printf("  %-8s %9s %9s %9s %9s\n", "method", "p50 ms", "p90 ms", "p99 ms", "min ms");
  for (const auto& [name, values] : {std::pair{"capsule", &capsule_ms}, std::pair{"bwrap", &bwrap_ms}}) {
    std::printf("  %-8s %9.2f %9.2f %9.2f %9.2f\n", name, median(*values), percentile(*values, 90),
                percentile(*values, 99), *std::min_element(values->begin(), values->end()));
  }
  std::printf("  capsule/bwrap p50 = %.2f (target <= %.1f: %s), p99 ratio = %.2f\n", ratio, kTargetLatencyRatio,
              ratio <= kTargetLatencyRatio ? "MET" : "NOT MET", percentile(capsule_ms, 99) / percentile(bwrap_ms, 99));
  std::printf("  capsule medians (ms): result.wall_ms %.2f, client wall - result.wall_ms %.2f, queued->started %.0f\n",
              median(record_wall_ms), median(outside_ms), median(queue_ms));
  std::printf("  result.setup_ms medians:");
  for (const char* step : {"prepare", "clone", "maps", "mounts", "seccomp", "exec", "total"}) {
    std::printf(" %s %.2f", step, median(setup[step]));
  }
  std::printf("\n");
  std::fflush(stdout);

  // 3. Throughput: o.clients threads, o.throughput_runs runs of each method.
  const long ticks_per_s = sysconf(_SC_CLK_TCK);
  const auto threads_before = thread_cpu_ticks(daemon.pid());
  const auto cpu_before = machine_cpu();
  const double daemon_cpu_before = process_tree_cpu_ms(daemon.pid());
  const double client_cpu_before = rusage_ms(RUSAGE_SELF);
  std::vector<double> tp_queue_ms, tp_daemon_ms;
  std::mutex tp_mutex;
  const Load capsule_load = run_load(o.clients, o.throughput_runs, [&](int) {
    const json row = capsule_true(client);
    std::lock_guard lock(tp_mutex);
    tp_queue_ms.push_back(static_cast<double>(row["times"].value("started", 0L) - row["times"].value("created", 0L)));
    tp_daemon_ms.push_back(static_cast<double>(row["times"].value("finished", 0L) - row["times"].value("started", 0L)));
  });
  runs_done += o.throughput_runs;
  const auto cpu_after = machine_cpu();
  const double capsule_cpu_per_run = (process_tree_cpu_ms(daemon.pid()) - daemon_cpu_before) / o.throughput_runs;
  const double client_cpu_per_run = (rusage_ms(RUSAGE_SELF) - client_cpu_before) / o.throughput_runs;
  const auto threads_after = thread_cpu_ticks(daemon.pid());
  const double capsule_machine_busy =
      100.0 * static_cast<double>(cpu_after.first - cpu_before.first) / static_cast<double>(cpu_after.second - cpu_before.second);
  std::vector<std::pair<double, int>> thread_pct;  // % of one core, tid
  for (const auto& [tid, ticks] : threads_after) {
    const long before = threads_before.count(tid) ? threads_before.at(tid) : 0;
    thread_pct.emplace_back(100.0 * static_cast<double>(ticks - before) / static_cast<double>(ticks_per_s) / capsule_load.seconds, tid);
  }
  std::sort(thread_pct.rbegin(), thread_pct.rend());

  const auto cpu_before_b = machine_cpu();
  const double bwrap_cpu_before = rusage_ms(RUSAGE_CHILDREN);
  const Load bwrap_load = run_load(o.clients, o.throughput_runs, [&](int) { bwrap.run(); });
  const double bwrap_cpu_per_run = (rusage_ms(RUSAGE_CHILDREN) - bwrap_cpu_before) / o.throughput_runs;
  const auto cpu_after_b = machine_cpu();
  const double bwrap_machine_busy =
      100.0 * static_cast<double>(cpu_after_b.first - cpu_before_b.first) / static_cast<double>(cpu_after_b.second - cpu_before_b.second);
  const double capsule_rate = o.throughput_runs / capsule_load.seconds;
  const double bwrap_rate = o.throughput_runs / bwrap_load.seconds;
  std::printf("\n[throughput] %d clients, %d runs per method\n", o.clients, o.throughput_runs);
  std::printf("  %-8s %10s %9s %12s %12s %13s %10s\n", "method", "runs/s", "seconds", "p50 lat ms", "p99 lat ms",
              "CPU ms/run", "CPU busy");
  std::printf("  %-8s %10.1f %9.2f %12.1f %12.1f %13.2f %9.0f%%\n", "capsule", capsule_rate, capsule_load.seconds,
              median(capsule_load.latency_ms), percentile(capsule_load.latency_ms, 99), capsule_cpu_per_run,
              capsule_machine_busy);
  std::printf("  %-8s %10.1f %9.2f %12.1f %12.1f %13.2f %9.0f%%\n", "bwrap", bwrap_rate, bwrap_load.seconds,
              median(bwrap_load.latency_ms), percentile(bwrap_load.latency_ms, 99), bwrap_cpu_per_run, bwrap_machine_busy);
  std::printf("  CPU ms/run: capsule = capsuled + its sandboxes (utime+stime+cutime+cstime), bwrap = bwrap + its\n"
              "  children (RUSAGE_CHILDREN); kernel work in kworkers (e.g. network namespace cleanup) is in neither.\n"
              "  The API client threads used %.2f CPU ms per capsule run on top.\n", client_cpu_per_run);
  std::printf("  capsule/bwrap throughput = %.2f; target >= %.0f sandboxes/s: %s\n", capsule_rate / bwrap_rate,
              kTargetThroughput, capsule_rate >= kTargetThroughput ? "MET" : "NOT MET");
  std::printf("  capsule medians: queued->started %.0f ms, started->finished %.0f ms (ledger timestamps)\n",
              median(tp_queue_ms), median(tp_daemon_ms));
  std::printf("  busiest capsuled threads (%% of one core):");
  for (std::size_t i = 0; i < std::min<std::size_t>(3, thread_pct.size()); ++i) {
    std::printf(" tid %d %.0f%%", thread_pct[i].second, thread_pct[i].first);
  }
  std::printf("\n");
  std::fflush(stdout);

  // 4. More runs up to o.runs_for_rss, in batches of 1000 with an RSS reading after each (daemon idle).
  const auto rss_start = Clock::now();
  while (runs_done < o.runs_for_rss) {
    const int batch = static_cast<int>(std::min<long>(1000 - runs_done % 1000, o.runs_for_rss - runs_done));
    capsule_batch(client, o.clients, batch);
    runs_done += batch;
    if (runs_done % 1000 == 0 || runs_done == o.runs_for_rss) {
      const json s = sample_rss();
      std::printf("[rss] after %ld runs: VmRSS %ld kB\n", runs_done, s["vm_rss_kb"].get<long>());
      std::fflush(stdout);
    }
  }
  if (rss_series.back()["runs"].get<long>() != runs_done) sample_rss();
  const json rss_final = rss_series.back();
  const long warm_runs = rss_warm["runs"].get<long>();
  const double growth_per_1000 =
      runs_done > warm_runs ? static_cast<double>(rss_final["vm_rss_kb"].get<long>() - rss_warm["vm_rss_kb"].get<long>()) /
                                  (static_cast<double>(runs_done - warm_runs) / 1000.0)
                            : 0.0;
  const auto logs = dir_usage(tmp + "/state/logs");
  const long long ledger = ledger_bytes(tmp + "/state/ledger.db");
  std::printf("\n[rss] capsuled VmRSS: idle %ld kB, after %ld runs %ld kB, after %ld runs %ld kB; growth %.1f kB per 1000 "
              "runs after the warm-up (top-up phase %.0f s)\n",
              rss_idle["vm_rss_kb"].get<long>(), warm_runs, rss_warm["vm_rss_kb"].get<long>(), runs_done,
              rss_final["vm_rss_kb"].get<long>(), growth_per_1000, ms_since(rss_start) / 1000);
  std::printf("[disk] state dir after %ld runs: %ld log files of %.1f MiB; ledger (db, wal, shm) %.1f MiB\n", runs_done,
              logs.first, static_cast<double>(logs.second) / (1 << 20), static_cast<double>(ledger) / (1 << 20));
  const std::string load_after = load_average();
  std::printf("load average after: %s\n", load_after.c_str());
  std::fflush(stdout);

  // 5. Stop the daemon, remove the temp dir.
  g_cleanup = nullptr;
  const std::string stopped = daemon.stop();
  std::printf("capsuled stopped: %s\n", stopped.c_str());
  std::error_code ec;
  const auto remove_start = Clock::now();
  if (!o.keep_tmp) fs::remove_all(tmp, ec);
  std::printf("temp dir %s %s in %.1f s\n", tmp.c_str(), o.keep_tmp ? "kept" : "removed", ms_since(remove_start) / 1000);
  if (ec) std::printf("warning: cannot remove %s: %s\n", tmp.c_str(), ec.message().c_str());

  json setup_json;
  for (const auto& [step, values] : setup) setup_json[step] = median(values);
  json threads_json = json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(3, thread_pct.size()); ++i) threads_json.push_back(thread_pct[i].first);
  const json out = {
      {"bench", "api_roundtrip"},
      {"rounds", o.rounds},
      {"clients", o.clients},
      {"load_average", {{"before", load_before}, {"after", load_after}}},
      {"state_dir_mount", state_mount},
      {"round_trip_ms",
       {{"capsule", {{"p50", median(capsule_ms)}, {"p90", percentile(capsule_ms, 90)}, {"p99", percentile(capsule_ms, 99)}}},
        {"bwrap", {{"p50", median(bwrap_ms)}, {"p90", percentile(bwrap_ms, 90)}, {"p99", percentile(bwrap_ms, 99)}}},
        {"ratio_p50", ratio},
        {"ratio_p99", percentile(capsule_ms, 99) / percentile(bwrap_ms, 99)},
        {"capsule_record_wall_p50", median(record_wall_ms)},
        {"capsule_outside_launcher_p50", median(outside_ms)},
        {"capsule_setup_p50", setup_json}}},
      {"throughput",
       {{"runs", o.throughput_runs},
        {"capsule_per_s", capsule_rate},
        {"bwrap_per_s", bwrap_rate},
        {"ratio", capsule_rate / bwrap_rate},
        {"capsule_latency_p50_ms", median(capsule_load.latency_ms)},
        {"capsule_latency_p99_ms", percentile(capsule_load.latency_ms, 99)},
        {"bwrap_latency_p50_ms", median(bwrap_load.latency_ms)},
        {"bwrap_latency_p99_ms", percentile(bwrap_load.latency_ms, 99)},
        {"capsule_cpu_ms_per_run", capsule_cpu_per_run},
        {"bwrap_cpu_ms_per_run", bwrap_cpu_per_run},
        {"client_cpu_ms_per_capsule_run", client_cpu_per_run},
        {"capsule_machine_cpu_busy_pct", capsule_machine_busy},
        {"bwrap_machine_cpu_busy_pct", bwrap_machine_busy},
        {"capsuled_top_thread_cpu_pct", threads_json}}},
      {"rss_kb",
       {{"idle", rss_idle["vm_rss_kb"]},
        {"after_warmup", rss_warm["vm_rss_kb"]},
        {"warmup_runs", warm_runs},
        {"final", rss_final["vm_rss_kb"]},
        {"final_runs", runs_done},
        {"growth_per_1000_runs", growth_per_1000},
        {"series", rss_series}}},
      {"state_dir", {{"log_files", logs.first}, {"log_bytes", logs.second}, {"ledger_bytes", ledger}}},
      {"targets",
       {{"latency_ratio_met", ratio <= kTargetLatencyRatio}, {"throughput_met", capsule_rate >= kTargetThroughput}}}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

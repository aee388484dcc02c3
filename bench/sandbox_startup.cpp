// Sandbox start-up benchmark: wall time to run /usr/bin/true in a full capsule sandbox vs. bwrap and unshare(1),
// interleaved in one process so machine noise hits all three alike; prints ratios and capsule's setup breakdown.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "images/host_image.h"
#include "sandbox/launcher.h"
#include "sandbox/result.h"
#include "sandbox/spec.h"

namespace {

namespace fs = std::filesystem;
using capsule::sandbox::Launcher;
using capsule::sandbox::LauncherOptions;
using capsule::sandbox::Result;
using capsule::sandbox::SandboxSpec;
using capsule::sandbox::Status;

constexpr double kTargetRatio = 0.6;  // capsule median must be at most this fraction of bwrap's
constexpr const char* kBenchRoot = "/tmp/capsule-bench";

struct Options {
  int runs = 200;
  int warmup = 10;
  std::string policy;  // empty: policies/default.json of the source tree
  int disk_mib = 0;    // >0: the sandbox's writable layers on a disk of its own (limits.disk_bytes)
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "sandbox_startup: %s\n", message.c_str());
  std::exit(1);
}

void usage_and_exit(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: sandbox_startup [--runs N] [--warmup N] [--policy PATH] [--disk MIB]\n"
               "  --runs N      measured runs per method (default 200)\n"
               "  --warmup N    unmeasured runs per method first (default 10)\n"
               "  --policy PATH seccomp profile (default: <source>/policies/default.json)\n"
               "  --disk MIB    give capsule sandboxes a disk limit of MIB (default: none)\n");
  std::exit(code);
}

int parse_count(const char* flag, const char* text, int minimum) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < minimum || value > 1'000'000) {
    die(std::string("bad value for ") + flag + ": " + text);
  }
  return static_cast<int>(value);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") usage_and_exit(0);
    if (i + 1 >= argc) usage_and_exit(2);
    if (arg == "--runs") {
      options.runs = parse_count("--runs", argv[++i], 1);
    } else if (arg == "--warmup") {
      options.warmup = parse_count("--warmup", argv[++i], 0);
    } else if (arg == "--disk") {
      options.disk_mib = parse_count("--disk", argv[++i], 16);
    } else if (arg == "--policy") {
      options.policy = argv[++i];
    } else {
      usage_and_exit(2);
    }
  }
  return options;
}

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  if (!file) die("cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The default profile: next to this source file (the build records an absolute path), else beside build/bin.
std::string default_policy_path() {
  const fs::path from_source = fs::path(__FILE__).parent_path().parent_path() / "policies/default.json";
  if (fs::exists(from_source)) return from_source.string();
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "../../policies/default.json").lexically_normal().string();
}

// ---- baselines: posix_spawn + waitpid, stdin/stdout on /dev/null, stderr inherited for diagnostics ----

// Absolute path of a program on this process's PATH, resolved once so each timed spawn is a single execve.
std::string find_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  die(name + " not found on PATH");
}

class Spawner {
 public:
  Spawner(std::vector<std::string> argv, const std::vector<std::string>& env) : argv_(std::move(argv)), env_(env) {
    for (auto& arg : argv_) argv_ptrs_.push_back(arg.data());
    argv_ptrs_.push_back(nullptr);
    for (auto& var : env_) env_ptrs_.push_back(var.data());
    env_ptrs_.push_back(nullptr);
    posix_spawn_file_actions_init(&actions_);
    posix_spawn_file_actions_addopen(&actions_, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions_, 1, "/dev/null", O_WRONLY, 0);
  }
  ~Spawner() { posix_spawn_file_actions_destroy(&actions_); }
  Spawner(const Spawner&) = delete;
  Spawner& operator=(const Spawner&) = delete;

  // Runs the command to completion; exits the benchmark unless it exited 0.
  void run() {
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, argv_ptrs_[0], &actions_, nullptr, argv_ptrs_.data(), env_ptrs_.data());
    if (rc != 0) die(describe() + ": posix_spawn: " + std::strerror(rc));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) die(describe() + ": waitpid: " + std::strerror(errno));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      die(describe() + (WIFEXITED(status) ? ": exited with " + std::to_string(WEXITSTATUS(status))
                                          : ": killed by signal " + std::to_string(WTERMSIG(status))));
    }
  }

  std::string describe() const {
    std::string text;
    for (const auto& arg : argv_) text += (text.empty() ? "" : " ") + arg;
    return text;
  }

 private:
  std::vector<std::string> argv_;
  std::vector<std::string> env_;
  std::vector<char*> argv_ptrs_;
  std::vector<char*> env_ptrs_;
  posix_spawn_file_actions_t actions_;
};

// ---- statistics ----

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Nearest-rank percentile.
double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

double mean(const std::vector<double>& values) {
  return values.empty() ? 0 : std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

struct Method {
  std::string name;
  std::function<void()> once;  // one complete launch, checked
  std::vector<double> wall_ms;
};

// First three fields of /proc/loadavg: other work on the machine shifts absolute numbers (not the ratios much).
std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string one, five, fifteen;
  file >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

double time_ms(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const std::string policy_path = options.policy.empty() ? default_policy_path() : options.policy;
  const std::string profile = read_text(policy_path);

  capsule::images::HostImage image;
  std::unique_ptr<Launcher> launcher;
  try {
    image = capsule::images::prepare_host_image(std::string(kBenchRoot) + "/images");
    LauncherOptions launcher_options;
    launcher_options.scratch_dir = std::string(kBenchRoot) + "/scratch";
    launcher_options.cgroup.parent = "capsule-bench";
    launcher = std::make_unique<Launcher>(std::move(launcher_options));
  } catch (const std::exception& e) {
    die(std::string("set-up failed (is capsule-init built next to this binary?): ") + e.what());
  }
  if (image.layers.empty()) die("host image has no layers");
  const std::string skeleton_etc = image.layers.front() + "/etc";

  // 1. capsule: the full sandbox, with cgroup limits so the cgroup path is exercised.
  SandboxSpec spec;
  spec.argv = {"/usr/bin/true"};
  spec.env = image.env;
  spec.rootfs_layers = image.layers;
  spec.mounts = image.mounts;
  spec.seccomp_profile = profile;
  spec.limits.wall_time = std::chrono::seconds(30);
  spec.limits.memory_bytes = 256ull << 20;
  spec.limits.pids = 64;
  spec.limits.disk_bytes = static_cast<std::uint64_t>(options.disk_mib) << 20;
  std::vector<capsule::sandbox::SetupTimings> setups;
  std::vector<double> capsule_run_ms;       // Result.wall_ms - setup.total: command runs, exits, init reaped
  std::vector<double> capsule_teardown_ms;  // measured wall - Result.wall_ms: usage, cgroup and scratch removal

  // 2. bwrap with equivalent namespaces and binds. Run as root, --unshare-user plus --uid/--gid 0 maps root to root.
  Spawner bwrap({find_program("bwrap"), "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                 "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                 "--symlink", "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                 "--ro-bind", skeleton_etc, "/etc", "--unshare-user", "--uid", "0", "--gid", "0", "/usr/bin/true"},
                image.env);
  // 3. unshare(1): namespaces only (pid, mount, ipc, uts, net), forked child; no rootfs, no user namespace.
  Spawner unshare({find_program("unshare"), "-fpmiun", "true"}, image.env);

  Result last;
  std::vector<Method> methods;
  methods.push_back({"capsule", [&] {
                       last = launcher->run(spec);
                       if (last.status != Status::kSucceeded || last.exit_code != 0) {
                         die(std::string("capsule run failed: ") + capsule::sandbox::status_name(last.status) +
                             (last.reason.empty() ? "" : ": " + last.reason));
                       }
                     }, {}});
  methods.push_back({"bwrap", [&] { bwrap.run(); }, {}});
  methods.push_back({"unshare", [&] { unshare.run(); }, {}});

  std::printf("sandbox_startup: /usr/bin/true, %d runs + %d warm-up per method, round-robin, order rotated per round\n",
              options.runs, options.warmup);
  std::printf("capsule: host image, %s, memory 256 MiB, pids 64, cgroup v%d parent capsule-bench, scratch %s/scratch\n",
              policy_path.c_str(), launcher->cgroup_version(), kBenchRoot);
  std::printf("bwrap:   %s\n", bwrap.describe().c_str());
  std::printf("unshare: %s\n", unshare.describe().c_str());
  std::printf("load average before: %s\n\n", load_average().c_str());
  std::fflush(stdout);

  const std::size_t count = methods.size();
  for (int round = 0; round < options.warmup + options.runs; ++round) {
    const bool measured = round >= options.warmup;
    for (std::size_t k = 0; k < count; ++k) {
      Method& method = methods[(static_cast<std::size_t>(round) + k) % count];
      const double ms = time_ms(method.once);
      if (!measured) continue;
      method.wall_ms.push_back(ms);
      if (&method == &methods[0]) {
        setups.push_back(last.setup);
        capsule_run_ms.push_back(last.wall_ms - last.setup.total_ms);
        capsule_teardown_ms.push_back(ms - last.wall_ms);
      }
    }
  }

  std::printf("load average after:  %s\n\n", load_average().c_str());
  std::printf("%-8s %9s %9s %9s %9s %9s   (wall ms per launch, spawn to reaped)\n", "method", "median", "p90", "p99",
              "mean", "min");
  for (const Method& m : methods) {
    std::printf("%-8s %9.3f %9.3f %9.3f %9.3f %9.3f\n", m.name.c_str(), median(m.wall_ms), percentile(m.wall_ms, 90),
                percentile(m.wall_ms, 99), mean(m.wall_ms), *std::min_element(m.wall_ms.begin(), m.wall_ms.end()));
  }
  const double capsule_median = median(methods[0].wall_ms);
  const double bwrap_ratio = capsule_median / median(methods[1].wall_ms);
  const double unshare_ratio = capsule_median / median(methods[2].wall_ms);
  std::printf("\nratio of medians: capsule/bwrap = %.3f, capsule/unshare = %.3f\n", bwrap_ratio, unshare_ratio);
  std::printf("target: capsule median <= %.1fx bwrap median -> %s\n", kTargetRatio,
              bwrap_ratio <= kTargetRatio ? "MET" : "NOT MET");

  auto field = [&](double capsule::sandbox::SetupTimings::*member) {
    std::vector<double> values;
    for (const auto& s : setups) values.push_back(s.*member);
    return median(values);
  };
  using T = capsule::sandbox::SetupTimings;
  std::printf("\ncapsule setup breakdown (median of each step, ms; Result.setup):\n");
  std::printf("  prepare %.3f  clone %.3f  maps %.3f  mounts %.3f  seccomp %.3f  exec %.3f  total %.3f\n",
              field(&T::prepare_ms), field(&T::clone_ms), field(&T::maps_ms), field(&T::mounts_ms),
              field(&T::seccomp_ms), field(&T::exec_ms), field(&T::total_ms));
  std::printf("  after exec: command to init reaped %.3f  teardown (cgroup kill/remove, scratch) %.3f\n",
              median(capsule_run_ms), median(capsule_teardown_ms));
  return 0;
}

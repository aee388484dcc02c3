// Sandbox start-up benchmark: wall time to run /usr/bin/true in a full capsule sandbox vs. bwrap and unshare(1),
// interleaved in one process so machine noise hits all three alike; prints ratios and capsule's setup breakdown.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "images/host_image.h"
#include "sandbox/launcher.h"
#include "sandbox/result.h"
#include "sandbox/spec.h"
#include "support/fail.h"
#include "support/files.h"
#include "support/spawn.h"
#include "support/stats.h"

namespace fs = std::filesystem;
using namespace capsule::bench;

namespace {

using capsule::sandbox::Launcher;
using capsule::sandbox::LauncherOptions;
using capsule::sandbox::Result;
using capsule::sandbox::SandboxSpec;
using capsule::sandbox::Status;

constexpr double kTargetRatio = 0.5;  // issue 13: a one-shot start at most this fraction of bwrap's
constexpr const char* kBenchRoot = "/tmp/capsule-bench";

struct Options {
  int runs = 200;
  int warmup = 10;
  std::string policy;  // empty: policies/default.json of the source tree
  int disk_mib = 0;    // >0: the sandbox's writable layers on a disk of its own (limits.disk_bytes)
};

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

struct Method {
  std::string name;
  std::function<void()> once;  // one complete launch, checked
  std::vector<double> wall_ms;
};

// A baseline run as a method: a failed run stops the benchmark.
std::function<void()> run_or_die(const Spawner& spawner) {
  return [&spawner] {
    try {
      spawner.run();
    } catch (const std::exception& e) {
      die(e.what());
    }
  };
}

}  // namespace

int main(int argc, char** argv) {
  set_program_name("sandbox_startup");
  const Options options = parse_options(argc, argv);
  const std::string policy_path = options.policy.empty() ? default_policy_path() : options.policy;
  const std::string profile = read_file(policy_path);

  capsule::images::HostImage image;
  std::unique_ptr<Launcher> launcher;
  std::unique_ptr<Launcher> pooled_launcher;  // the same, with one box kept ready (warm figures)
  try {
    image = capsule::images::prepare_host_image(std::string(kBenchRoot) + "/images");
    LauncherOptions launcher_options;
    launcher_options.scratch_dir = std::string(kBenchRoot) + "/scratch";
    launcher_options.cgroup.parent = "capsule-bench";
    LauncherOptions pooled_options = launcher_options;
    pooled_options.scratch_dir += "-pool";
    pooled_options.cgroup.parent += "-pool";
    pooled_options.pool.boxes_per_environment = 1;
    launcher = std::make_unique<Launcher>(std::move(launcher_options));
    pooled_launcher = std::make_unique<Launcher>(std::move(pooled_options));
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
  Result last_pooled;
  auto capsule_run = [&](Launcher& with, Result& into) {
    return [&] {
      into = with.run(spec);
      if (into.status != Status::kSucceeded || into.exit_code != 0) {
        die(std::string("capsule run failed: ") + capsule::sandbox::status_name(into.status) +
            (into.reason.empty() ? "" : ": " + into.reason));
      }
    };
  };
  std::vector<Method> methods;
  methods.push_back({"capsule", capsule_run(*launcher, last), {}});
  methods.push_back({"bwrap", run_or_die(bwrap), {}});
  methods.push_back({"unshare", run_or_die(unshare), {}});
  methods.push_back({"pooled", capsule_run(*pooled_launcher, last_pooled), {}});
  std::vector<double> pooled_exec_ms;  // a pooled run's setup: from taking the box to the command's execve
  std::size_t pooled_hits = 0;

  std::printf("sandbox_startup: /usr/bin/true, %d runs + %d warm-up per method, round-robin, order rotated per round\n",
              options.runs, options.warmup);
  std::printf("capsule: host image, %s, memory 256 MiB, pids 64, cgroup v%d parent capsule-bench, scratch %s/scratch\n",
              policy_path.c_str(), launcher->cgroup_version(), kBenchRoot);
  std::printf("bwrap:   %s\n", bwrap.describe().c_str());
  std::printf("unshare: %s\n", unshare.describe().c_str());
  std::printf("pooled:  capsule with one box of this spec kept ready (LauncherOptions.pool); cold = capsule above\n");
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
      if (&method == &methods[3]) {
        pooled_hits += last_pooled.setup.pooled ? 1 : 0;
        pooled_exec_ms.push_back(last_pooled.setup.total_ms);
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
  const double pooled_ratio = median(methods[3].wall_ms) / median(methods[1].wall_ms);
  std::printf("ratio of medians: pooled/bwrap = %.3f (%zu of %zu pooled runs found their box ready)\n", pooled_ratio,
              pooled_hits, methods[3].wall_ms.size());
  std::printf("target: median <= %.1fx bwrap median -> cold %s, pooled %s\n", kTargetRatio,
              bwrap_ratio <= kTargetRatio ? "MET" : "NOT MET", pooled_ratio <= kTargetRatio ? "MET" : "NOT MET");

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
  std::printf("  after exec: command to init reaped %.3f  until run() returned %.3f (teardown is the reaper's)\n",
              median(capsule_run_ms), median(capsule_teardown_ms));
  std::printf("pooled: box taken to execve %.3f\n", median(pooled_exec_ms));
  pooled_launcher->remove_cgroup_parent();
  launcher->remove_cgroup_parent();
  return 0;
}

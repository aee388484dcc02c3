// kernel_floor: what the kernel alone charges for a capsule box (floor_box.h), beside bwrap in the same process:
// wall p50 (interleaved rounds) and CPU per sandbox (sequential phases). The floor capsule's own work sits on.
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "images/host_image.h"
#include "kernel_floor/floor_box.h"
#include "sandbox/seccomp.h"
#include "support/cpu_time.h"
#include "support/fail.h"
#include "support/files.h"
#include "support/spawn.h"
#include "support/stats.h"

namespace fs = std::filesystem;
using namespace capsule::bench;
using namespace capsule::bench::kernel_floor;

namespace {

constexpr const char* kBenchRoot = "/tmp/capsule-bench";
constexpr const char* kCgroupParent = "capsule-floor";

struct Options {
  int runs = 200;
  int warmup = 10;
  int cpu_runs = 300;
  std::uint64_t disk_mib = 10240;  // capsuled's default limits.disk
};

[[noreturn]] void usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: kernel_floor [--runs N] [--warmup N] [--cpu-runs N] [--disk MIB]\n"
               "  --runs N      measured runs per method, interleaved (default 200)\n"
               "  --warmup N    unmeasured rounds first (default 10)\n"
               "  --cpu-runs N  runs per method in the CPU phase, one method at a time (default 300)\n"
               "  --disk MIB    the floor+disk box's disk, as limits.disk (default 10240, capsuled's default)\n");
  std::exit(code);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") usage(0);
    if (i + 1 >= argc) usage(2);
    char* end = nullptr;
    const long value = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || value < 0 || value > 1'000'000) die("bad value for " + arg);
    if (arg == "--runs" && value > 0) {
      options.runs = static_cast<int>(value);
    } else if (arg == "--warmup") {
      options.warmup = static_cast<int>(value);
    } else if (arg == "--cpu-runs" && value > 0) {
      options.cpu_runs = static_cast<int>(value);
    } else if (arg == "--disk" && value >= 16) {
      options.disk_mib = static_cast<std::uint64_t>(value);
    } else {
      usage(2);
    }
  }
  return options;
}

double process_cpu_ms() { return rusage_ms(RUSAGE_SELF) + rusage_ms(RUSAGE_CHILDREN); }

// Busy time of the whole machine in ms (kworkers too: a network namespace's cleanup runs there).
double machine_busy_ms() {
  return static_cast<double>(machine_cpu().first) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Method {
  std::string name;
  std::function<void()> once;
  std::vector<double> wall_ms;
  double cpu_ms_per_run = 0;
  double machine_ms_per_run = 0;
};

}  // namespace

int main(int argc, char** argv) {
  set_program_name("kernel_floor");
  const Options options = parse_options(argc, argv);
  if (geteuid() != 0) die("needs root (cgroups, loop devices, idmapped mounts)");
  // A private mount namespace: the scratch tmpfs and every box's disk vanish with this process.
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) die("unshare(CLONE_NEWNS)");

  FloorSetup setup;
  const capsule::images::HostImage image = capsule::images::prepare_host_image(std::string(kBenchRoot) + "/images");
  if (image.layers.size() != 1) die("expected the host image's one skeleton layer");
  setup.lower = image.layers.front();
  setup.scratch = std::string(kBenchRoot) + "/floor-scratch";
  setup.disk_dir = std::string(kBenchRoot) + "/floor-disks";
  for (const std::string& dir : {setup.scratch, setup.disk_dir}) fs::create_directories(dir);
  if (mount("tmpfs", setup.scratch.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) die("tmpfs on " + setup.scratch);
  for (const char* controller : {"memory", "pids", "cpu", "cpuacct", "freezer"}) {
    const std::string parent = std::string("/sys/fs/cgroup/") + controller + "/" + kCgroupParent;
    if (!fs::exists(std::string("/sys/fs/cgroup/") + controller + "/cgroup.procs")) die("needs cgroup v1 " + std::string(controller));
    setup.cgroup_parents.push_back(parent);
  }
  setup.view_hierarchies = {"memory", "pids", "cpu", "cpuacct", "cpuset"};
  setup.seccomp = capsule::sandbox::compile_seccomp(capsule::sandbox::parse_seccomp_profile(read_file(default_policy_path())));
  setup.idmap_userns = make_idmap_userns(setup.host_root);
  disk_template(setup, options.disk_mib);
  // Groups an earlier run left (it died mid-box) are removed first; all of them at the end or on failure.
  auto remove_groups = [&setup] {
    for (const std::string& parent : setup.cgroup_parents) {
      std::error_code ec;
      for (const auto& box : fs::directory_iterator(parent, ec)) {
        if (!box.is_directory()) continue;
        rmdir((box.path() / "exec").c_str());
        rmdir(box.path().c_str());
      }
      rmdir(parent.c_str());
    }
  };
  remove_groups();
  for (const std::string& parent : setup.cgroup_parents) fs::create_directories(parent);
  set_cleanup(remove_groups);

  Spawner bwrap({find_program("bwrap"), "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr", "--symlink",
                 "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink",
                 "usr/sbin", "/sbin", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind",
                 setup.lower + "/etc", "/etc", "--unshare-user", "--uid", "0", "--gid", "0", "/usr/bin/true"},
                image.env);
  int number = 0;
  auto floor_box = [&](std::uint64_t disk_mib) {
    return [&, disk_mib] {
      try {
        run_floor_box(setup, disk_mib, number++);
      } catch (const std::exception& e) {
        die(e.what());
      }
    };
  };
  std::vector<Method> methods;
  methods.push_back({"floor", floor_box(0), {}, 0, 0});
  methods.push_back({"floor+disk", floor_box(options.disk_mib), {}, 0, 0});
  methods.push_back({"disk", [&] {
                       try {
                         run_disk_only(setup, options.disk_mib, number++);
                       } catch (const std::exception& e) {
                         die(e.what());
                       }
                     },
                     {}, 0, 0});
  methods.push_back({"bwrap", [&bwrap] {
                       try {
                         bwrap.run();
                       } catch (const std::exception& e) {
                         die(e.what());
                       }
                     },
                     {}, 0, 0});

  std::printf("kernel_floor: /usr/bin/true; %d runs + %d warm-up per method interleaved, then %d each for CPU\n",
              options.runs, options.warmup, options.cpu_runs);
  std::printf("floor:      a capsule box's kernel work from raw syscalls: user, mount, pid, ipc, uts, net, cgroup\n"
              "            namespaces; idmapped skeleton + overlay root (upper on a tmpfs), idmapped /usr, the same 30\n"
              "            mounts, 5 cgroup v1 groups + leaves (limits set, usage read, removed), lo up, init forking\n"
              "            the command, 41 bounding caps dropped, ids, no_new_privs, the default seccomp filter\n");
  std::printf("floor+disk: the same with the writable layers on an ext4 disk of %llu MiB (a loop device on a sparse\n"
              "            image, the template's data written through it, mount; released at unmount)\n"
              "disk:       that disk alone: made, its dirs and overlayfs's work dir made, unmounted\n",
              static_cast<unsigned long long>(options.disk_mib));
  std::printf("bwrap:      %s\n", bwrap.describe().c_str());
  std::printf("load average before: %s\n\n", load_average().c_str());
  std::fflush(stdout);

  const std::size_t count = methods.size();
  for (int round = 0; round < options.warmup + options.runs; ++round) {
    for (std::size_t k = 0; k < count; ++k) {
      Method& method = methods[(static_cast<std::size_t>(round) + k) % count];
      const double ms = time_ms(method.once);
      if (round >= options.warmup) method.wall_ms.push_back(ms);
    }
  }
  // Each phase's window closes after a settle time, so what the kernel finishes later (a network namespace's
  // cleanup in a kworker) is counted with the runs that caused it; the machine's idle busy rate, measured over
  // the same span before, is taken off.
  constexpr auto kSettle = std::chrono::seconds(2);
  const double idle_before = machine_busy_ms();
  std::this_thread::sleep_for(kSettle);
  const double idle_busy_ms_per_s = (machine_busy_ms() - idle_before) / 2.0;
  for (Method& method : methods) {
    const double cpu_before = process_cpu_ms();
    const double machine_before = machine_busy_ms();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.cpu_runs; ++i) method.once();
    std::this_thread::sleep_for(kSettle);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    method.cpu_ms_per_run = (process_cpu_ms() - cpu_before) / options.cpu_runs;
    method.machine_ms_per_run = (machine_busy_ms() - machine_before - idle_busy_ms_per_s * seconds) / options.cpu_runs;
  }

  std::printf("load average after:  %s\n\n", load_average().c_str());
  std::printf("%-11s %8s %8s %8s %8s   %12s %14s\n", "method", "p50 ms", "p90 ms", "p99 ms", "min ms", "CPU ms/run",
              "machine ms/run");
  for (const Method& m : methods) {
    std::printf("%-11s %8.2f %8.2f %8.2f %8.2f   %12.2f %14.2f\n", m.name.c_str(), median(m.wall_ms),
                percentile(m.wall_ms, 90), percentile(m.wall_ms, 99), percentile(m.wall_ms, 0), m.cpu_ms_per_run,
                m.machine_ms_per_run);
  }
  const Method& bw = methods.back();
  std::printf("\nfloor/bwrap: wall %.2f, CPU %.2f; floor+disk/bwrap: wall %.2f, CPU %.2f\n",
              median(methods[0].wall_ms) / median(bw.wall_ms), methods[0].cpu_ms_per_run / bw.cpu_ms_per_run,
              median(methods[1].wall_ms) / median(bw.wall_ms), methods[1].cpu_ms_per_run / bw.cpu_ms_per_run);
  std::printf("CPU ms/run: this process and its reaped children (getrusage); machine ms/run: /proc/stat busy time over\n"
              "the phase and 2 s after it, less the idle machine's rate, divided by its runs (includes kworkers, e.g. a\n"
              "network namespace's cleanup)\n");
  std::printf("{\"bench\":\"kernel_floor\",\"runs\":%d", options.runs);
  for (const Method& m : methods) {
    std::printf(",\"%s\":{\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"cpu_ms_per_run\":%.3f,\"machine_ms_per_run\":%.3f}",
                m.name.c_str(), median(m.wall_ms), percentile(m.wall_ms, 99), m.cpu_ms_per_run, m.machine_ms_per_run);
  }
  std::printf("}\n");
  run_cleanup();
  return 0;
}

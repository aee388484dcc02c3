// Session exec benchmark: the round trip of /usr/bin/true exec'ed into a warm box (Sandbox::exec, its own cgroup,
// seccomp, no capabilities) next to a fresh one-shot run and a plain posix_spawn on the host, interleaved in one process.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "images/host_image.h"
#include "sandbox/command.h"
#include "sandbox/launcher.h"
#include "support/fail.h"
#include "support/files.h"
#include "support/spawn.h"
#include "support/stats.h"

using namespace capsule::bench;
namespace sb = capsule::sandbox;

namespace {

constexpr const char* kBenchRoot = "/tmp/capsule-bench";
constexpr double kTargetExecP50Ms = 2.0;

int parse_count(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 1'000'000) die(std::string("bad count: ") + text);
  return static_cast<int>(value);
}

// Drives the box and one exec until it ends, as capsuled's session loop does.
sb::Result await(sb::Sandbox& box, sb::Exec& exec) {
  while (!exec.finished()) {
    std::vector<pollfd> wanted = box.interest();
    for (const pollfd& p : exec.interest()) wanted.push_back(p);
    const std::int64_t deadline = exec.next_deadline();
    const int timeout = deadline == 0 ? 1000
                                      : static_cast<int>(std::max<std::int64_t>(0, (deadline - sb::monotonic_ns()) / 1000000 + 1));
    poll(wanted.data(), wanted.size(), timeout);
    for (const pollfd& p : wanted) {
      box.handle(p.fd, p.revents);
      exec.handle(p.fd, p.revents);
    }
    exec.tick(sb::monotonic_ns());
  }
  return exec.finish();
}

struct Method {
  std::string name;
  std::function<void()> once;
  std::vector<double> wall_ms;
  std::function<void()> after = [] {};  // untimed: what follows the answer, as a session does it
};

}  // namespace

int main(int argc, char** argv) {
  set_program_name("session_exec");
  int runs = 300;
  int warmup = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) runs = parse_count(argv[++i]);
    else if (arg == "--warmup" && i + 1 < argc) warmup = parse_count(argv[++i]);
    else die("usage: session_exec [--runs N] [--warmup N]");
  }
  const std::string profile = read_file(default_policy_path());
  capsule::images::HostImage image;
  std::unique_ptr<sb::Launcher> launcher;
  try {
    image = capsule::images::prepare_host_image(std::string(kBenchRoot) + "/images");
    sb::LauncherOptions options;
    options.scratch_dir = std::string(kBenchRoot) + "/scratch";
    options.cgroup.parent = "capsule-bench";
    launcher = std::make_unique<sb::Launcher>(std::move(options));
  } catch (const std::exception& e) {
    die(std::string("set-up failed (is capsule-init built next to this binary?): ") + e.what());
  }

  sb::SandboxSpec spec;
  spec.argv = {"/usr/bin/true"};
  spec.env = image.env;
  spec.rootfs_layers = image.layers;
  spec.mounts = image.mounts;
  spec.seccomp_profile = profile;
  spec.limits.wall_time = std::chrono::seconds(30);
  spec.limits.memory_bytes = 256ull << 20;
  spec.limits.pids = 64;
  sb::EnvironmentSpec environment = sb::environment_of(spec);
  environment.session = true;
  const sb::ProcessSpec process = sb::process_of(spec);
  std::unique_ptr<sb::Sandbox> box = launcher->create(environment);

  auto check = [](const sb::Result& r, const char* what) {
    if (r.status != sb::Status::kSucceeded) die(std::string(what) + " failed: " + sb::status_name(r.status) + " " + r.reason);
  };
  Spawner host({find_program("true")}, image.env);
  std::vector<Method> methods;
  std::unique_ptr<sb::Exec> last_exec;
  methods.push_back({"exec", [&] {
                       last_exec = box->exec(process);
                       check(await(*box, *last_exec), "exec");
                     }, {}, [&] {
                       last_exec.reset();  // its cgroup goes, and the next one is made, after the answer
                       box->prepare_exec();
                     }});
  methods.push_back({"one-shot", [&] { check(launcher->run(spec), "one-shot run"); }, {}});
  methods.push_back({"host", [&] { host.run(); }, {}});

  std::printf("session_exec: /usr/bin/true, %d runs + %d warm-up per method, round-robin\n", runs, warmup);
  std::printf("exec:     Sandbox::exec into one warm box (host image, default seccomp profile, memory 256 MiB, pids 64)\n");
  std::printf("one-shot: Launcher::run of the same spec (create + exec + wait + destroy)\n");
  std::printf("host:     posix_spawn + waitpid of %s\n", host.describe().c_str());
  std::printf("load average before: %s\n\n", load_average().c_str());
  for (int round = 0; round < warmup + runs; ++round) {
    for (std::size_t k = 0; k < methods.size(); ++k) {
      Method& method = methods[(static_cast<std::size_t>(round) + k) % methods.size()];
      const double ms = time_ms(method.once);
      method.after();
      if (round >= warmup) method.wall_ms.push_back(ms);
    }
  }
  std::printf("load average after:  %s\n\n", load_average().c_str());
  std::printf("%-9s %9s %9s %9s %9s   (wall ms per command, request to reaped)\n", "method", "p50", "p90", "p99", "min");
  for (const Method& m : methods) {
    std::printf("%-9s %9.3f %9.3f %9.3f %9.3f\n", m.name.c_str(), median(m.wall_ms), percentile(m.wall_ms, 90),
                percentile(m.wall_ms, 99), *std::min_element(m.wall_ms.begin(), m.wall_ms.end()));
  }
  const double exec_p50 = median(methods[0].wall_ms);
  std::printf("\nratios of p50: exec/one-shot = %.3f, exec/host = %.2f\n", exec_p50 / median(methods[1].wall_ms),
              exec_p50 / median(methods[2].wall_ms));
  std::printf("target: exec p50 <= %.1f ms (library level; the API adds its round trip) -> %s\n", kTargetExecP50Ms,
              exec_p50 <= kTargetExecP50Ms ? "MET" : "NOT MET");
  box->destroy();
  launcher->remove_cgroup_parent();  // as sandbox_startup does: no empty capsule-bench group left behind
  return 0;
}

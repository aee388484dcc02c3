// capsule-launch: runs one command in a real sandbox on the built-in host image through the launcher
// library and prints the Result as JSON. The daemon-less way in, used by the README's first command.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/units.h"
#include "images/host_image.h"
#include "sandbox/launcher.h"
#include "sandbox/result_json.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int exit_code_for(const capsule::sandbox::Result& result) {
  using capsule::sandbox::Status;
  switch (result.status) {
    case Status::kSucceeded:
    case Status::kFailed: return result.exit_code;
    case Status::kTimedOut: return 124;
    case Status::kOomKilled:
    case Status::kCancelled: return 137;
    case Status::kSignaled: return 128 + result.signal;
    case Status::kSetupFailed: return result.exit_code == 127 ? 127 : 125;
    case Status::kInternalError: return 125;
  }
  return 125;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run one command in a capsule sandbox (host image) and print its result as JSON"};
  std::vector<std::string> command;
  std::vector<std::string> env;
  std::string timeout = "10m", memory, cpu_time, state_dir = "/var/lib/capsule", policy, workspace;
  std::uint64_t pids = 0;
  double cpus = 0;
  bool workspace_rw = false;
  app.add_option("--timeout", timeout, "wall-clock limit, e.g. 90s, 10m")->capture_default_str();
  app.add_option("--cpu-time", cpu_time, "CPU time limit for the whole sandbox");
  app.add_option("--memory", memory, "memory limit, e.g. 512m, 4g");
  app.add_option("--pids", pids, "maximum number of processes");
  app.add_option("--cpus", cpus, "CPU bandwidth in cores");
  app.add_option("--env,-e", env, "extra environment variable K=V");
  app.add_option("--workspace,-w", workspace, "host directory mounted at /workspace (read-only unless --rw)");
  app.add_flag("--rw", workspace_rw, "mount the workspace read-write");
  app.add_option("--policy", policy, "seccomp profile (OCI JSON); default: policies/default.json");
  app.add_option("--state-dir", state_dir, "scratch and image cache directory")->capture_default_str();
  app.add_option("command", command, "command and arguments (after --)")->required();
  CLI11_PARSE(app, argc, argv);

  try {
    capsule::sandbox::LauncherOptions options;
    options.scratch_dir = state_dir + "/scratch";
    capsule::sandbox::Launcher launcher(options);
    capsule::images::HostImage image = capsule::images::prepare_host_image(state_dir + "/images");

    capsule::sandbox::SandboxSpec spec;
    spec.argv = command;
    spec.env = image.env;
    spec.env.insert(spec.env.end(), env.begin(), env.end());
    spec.rootfs_layers = image.layers;
    spec.mounts = image.mounts;
    if (!workspace.empty()) {
      spec.mounts.push_back({workspace, "/workspace", !workspace_rw, true});
      spec.cwd = "/workspace";
    }
    spec.seccomp_profile = read_file(policy.empty() ? std::string(CAPSULE_DEFAULT_POLICY) : policy);
    spec.limits.wall_time = capsule::base::parse_duration(timeout);
    if (!cpu_time.empty()) spec.limits.cpu_time = capsule::base::parse_duration(cpu_time);
    if (!memory.empty()) spec.limits.memory_bytes = capsule::base::parse_size(memory);
    spec.limits.pids = pids;
    spec.limits.cpus = cpus;

    capsule::sandbox::Result result = launcher.run(spec);
    std::cout << capsule::sandbox::result_to_json(result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
    return exit_code_for(result);
  } catch (const std::exception& e) {
    std::cerr << "capsule-launch: " << e.what() << std::endl;
    return 125;
  }
}

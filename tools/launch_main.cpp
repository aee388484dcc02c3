// capsule-launch: runs one command in a real sandbox on the built-in host image through the launcher
// library and prints the Result as JSON. The daemon-less way in; flags and exit status are `capsule run`'s.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/units.h"
#include "client/cli_args.h"
#include "client/run_view.h"
#include "images/host_image.h"
#include "sandbox/launcher.h"
#include "sandbox/result_json.h"

namespace {

using namespace capsule;

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The sandbox these flags describe on the host image (its env first, then -e items; the workspace bind-mounted,
// read-only unless --rw, and the working directory unless -w says otherwise).
sandbox::SandboxSpec spec_for(const client::RunOptions& options, bool workspace_rw, const std::string& policy,
                              const images::HostImage& image) {
  sandbox::SandboxSpec spec;
  spec.argv = options.argv;
  spec.env = image.env;
  for (const auto& [key, value] : client::env_assignments(options.env)) spec.env.push_back(key + "=" + value);
  spec.rootfs_layers = image.layers;
  spec.mounts = image.mounts;
  if (!options.workspace.empty()) {
    spec.mounts.push_back({client::absolute_path(options.workspace), "/workspace", !workspace_rw, true});
    spec.cwd = "/workspace";
  }
  if (!options.workdir.empty()) spec.cwd = options.workdir;
  spec.seccomp_profile = read_file(policy.empty() ? std::string(CAPSULE_DEFAULT_POLICY) : policy);
  spec.limits.wall_time = base::parse_duration(options.timeout);
  if (!options.cpu_time.empty()) spec.limits.cpu_time = base::parse_duration(options.cpu_time);
  if (!options.memory.empty()) spec.limits.memory_bytes = base::parse_size(options.memory);
  if (options.pids) {
    if (*options.pids < 0) throw std::invalid_argument("--pids must not be negative");
    spec.limits.pids = static_cast<std::uint64_t>(*options.pids);
  }
  if (options.cpus) spec.limits.cpus = *options.cpus;
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run one command in a capsule sandbox (host image) and print its result as JSON"};
  app.footer(client::kExitCodeHelp);
  client::RunOptions options;
  options.timeout = "10m";
  using client::RunFlag;
  client::add_run_flags(app, options,
                        {RunFlag::kWorkspace, RunFlag::kWorkdir, RunFlag::kTimeout, RunFlag::kCpuTime,
                         RunFlag::kMemory, RunFlag::kCpus, RunFlag::kPids, RunFlag::kEnv});
  app.get_option("--timeout")->capture_default_str();
  std::string state_dir = "/var/lib/capsule", policy;
  bool workspace_rw = false;
  app.add_flag("--rw", workspace_rw, "mount the workspace read-write (default: read-only)");
  app.add_option("--policy", policy, "seccomp profile (OCI JSON); default: policies/default.json");
  app.add_option("--state-dir", state_dir, "scratch and image cache directory")->capture_default_str();
  app.add_option("command", options.argv, "command and arguments (after --)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : client::kExitCapsuleFailed;
  }

  try {
    sandbox::LauncherOptions launcher_options;
    launcher_options.scratch_dir = state_dir + "/scratch";
    // A cgroup parent of its own, removed at exit: capsuled's default "capsule" would take this run's box for
    // a crashed daemon's leftover (and kill it) when a capsuled started meanwhile.
    launcher_options.cgroup.parent = "capsule-launch-" + std::to_string(::getpid());
    sandbox::Launcher launcher(launcher_options);
    struct RemoveParent {
      sandbox::Launcher& launcher;
      ~RemoveParent() {
        try {
          launcher.remove_cgroup_parent();
        } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): an empty parent left is harmless
        }
      }
    } remove_parent{launcher};
    const images::HostImage image = images::prepare_host_image(state_dir + "/images");
    const sandbox::Result result = launcher.run(spec_for(options, workspace_rw, policy, image));
    std::cout << sandbox::result_to_json(result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << std::endl;
    return client::exit_code_for(client::ending_of(result));
  } catch (const std::exception& e) {
    std::cerr << "capsule-launch: " << e.what() << std::endl;
    return client::kExitCapsuleFailed;
  }
}

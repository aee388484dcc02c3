// Launcher::run: prepares scratch dirs, cgroup and seccomp program, clones the sandbox child, sets up
// its user namespace from outside, hands capsule-init its config, supervises, and builds the Result.
#include "sandbox/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "sandbox/channel.h"
#include "sandbox/clone.h"
#include "sandbox/command.h"
#include "sandbox/error.h"
#include "sandbox/init_config.h"
#include "sandbox/net.h"
#include "sandbox/output.h"
#include "sandbox/scratch.h"
#include "sandbox/seccomp.h"
#include "sandbox/supervisor.h"
#include "base/unique_fd.h"
#include "sandbox/userns.h"

namespace capsule::sandbox {

struct Launcher::State {
  LauncherOptions options;
  std::unique_ptr<CgroupManager> cgroups;
  base::UniqueFd init_exe;
  std::mutex cache_mutex;
  std::map<std::string, std::vector<std::uint8_t>> seccomp_cache;  // profile text -> BPF
  std::map<std::pair<uid_t, gid_t>, base::UniqueFd> owner_namespaces;  // writable-bind owner -> mapping userns

  const std::vector<std::uint8_t>& seccomp_program(const std::string& profile);
  base::UniqueFd writable_bind(const BindMount& bind);
  base::UniqueFd owner_mapped_layer(const std::string& layer, std::pair<std::uint32_t, std::uint32_t> owner);
  // The user namespace mapping `uid`:`gid` to sandbox root and nothing else (kept for reuse). Under cache_mutex.
  int owner_namespace_locked(std::uint32_t uid, std::uint32_t gid);
};

const std::vector<std::uint8_t>& Launcher::State::seccomp_program(const std::string& profile) {
  std::lock_guard lock(cache_mutex);
  auto it = seccomp_cache.find(profile);
  if (it == seccomp_cache.end()) {
    it = seccomp_cache.emplace(profile, compile_seccomp(parse_seccomp_profile(profile))).first;
  }
  return it->second;
}

// A writable bind never lets sandbox root write as host root (it could plant set-uid root files for the
// host to run): sandbox root is mapped to the directory's owner, or, for root-owned directories, not idmapped
// at all, so its writes land as the unprivileged sandbox root id and root-owned files stay read-only.
base::UniqueFd Launcher::State::writable_bind(const BindMount& bind) {
  struct stat st;
  if (stat(bind.source.c_str(), &st) != 0) throw_errno("idmap", bind.source, "stat");
  if (!bind.idmap || st.st_uid == 0 || st.st_gid == 0) {
    return base::UniqueFd(make_detached_mount(bind.source, -1, false, false, true));
  }
  std::lock_guard lock(cache_mutex);
  return base::UniqueFd(make_detached_mount(bind.source, owner_namespace_locked(st.st_uid, st.st_gid), true, false, true));
}

base::UniqueFd Launcher::State::owner_mapped_layer(const std::string& layer, std::pair<std::uint32_t, std::uint32_t> owner) {
  std::lock_guard lock(cache_mutex);
  return base::UniqueFd(make_detached_mount(layer, owner_namespace_locked(owner.first, owner.second), true, true, false));
}

int Launcher::State::owner_namespace_locked(std::uint32_t uid, std::uint32_t gid) {
  base::UniqueFd& userns = owner_namespaces[{uid, gid}];
  if (!userns) userns.reset(make_owner_mapping_namespace(uid, gid, options.host_id_base));
  return userns.get();
}

namespace {

// How long after the wall-time deadline capsule-init ends the sandbox by itself (when capsuled is down).
constexpr std::int64_t kWatchdogMarginMs = 1000;

std::string default_init_binary() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("capsule-init") : (self.parent_path() / "capsule-init").string();
}

double ms_between(std::int64_t from_ns, std::int64_t to_ns) {
  return to_ns > from_ns ? static_cast<double>(to_ns - from_ns) / 1e6 : 0.0;
}

std::string to_hex(const std::vector<std::uint8_t>& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    hex.push_back(digits[b >> 4]);
    hex.push_back(digits[b & 0xf]);
  }
  return hex;
}

// Kills and reaps the child if supervision never took it over (an error between clone and supervise).
struct ChildGuard {
  int pidfd = -1;
  ~ChildGuard() {
    if (pidfd < 0) return;
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    siginfo_t info;
    waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info, WEXITED | __WALL);
    close(pidfd);
  }
};

struct Pipe {
  base::UniqueFd read_end;
  base::UniqueFd write_end;
};

Pipe make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipes", "", "pipe2");
  return {base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

// stdin: a socket pair when there are bytes to feed (send() with MSG_NOSIGNAL never raises SIGPIPE in
// the launcher's process), otherwise a pipe whose write end is closed at once, so reads see EOF.
Pipe make_stdin(bool has_data) {
  if (!has_data) return make_pipe();
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw_errno("pipes", "", "socketpair");
  shutdown(fds[0], SHUT_WR);
  shutdown(fds[1], SHUT_RD);
  return {base::UniqueFd(fds[0]), base::UniqueFd(fds[1])};
}

// With a disk limit, each copy-on-write view's upper and work dirs are made on the sandbox's disk and its
// upper is bind-mounted where the caller asked for it (it must be empty: nothing there would be seen).
std::vector<OverlayMount> place_overlays_on_disk(const SandboxSpec& spec, const ScratchDir& scratch,
                                                 std::uint32_t root_id) {
  std::vector<OverlayMount> placed = spec.overlays;
  SandboxDisk* disk = scratch.disk();
  if (disk == nullptr) return placed;
  for (std::size_t i = 0; i < placed.size(); ++i) {
    std::error_code ec;
    if (!std::filesystem::is_empty(placed[i].upper_dir, ec) || ec) {
      throw_error("disk", placed[i].upper_dir, "an overlay's upper dir must be empty with a disk limit");
    }
    const std::string upper = disk->make_dir("overlay-" + std::to_string(i) + "/upper", root_id);
    const std::string work = disk->make_dir("overlay-" + std::to_string(i) + "/work", root_id);
    disk->bind_to(upper, placed[i].upper_dir);
    placed[i].upper_dir = upper;
    placed[i].work_dir = work;
  }
  return placed;
}

InitConfig make_init_config(const SandboxSpec& spec, const std::vector<OverlayMount>& overlays,
                            const ScratchDir& scratch, const std::string& program_hex) {
  InitConfig config;
  config.argv = spec.argv;
  config.env = spec.env;
  config.cwd = spec.cwd;
  config.uid = spec.uid;
  config.gid = spec.gid;
  config.hostname = spec.hostname;
  config.readonly_rootfs = spec.readonly_rootfs;
  config.tmp_size_bytes = spec.limits.tmp_size_bytes;
  config.nofile = spec.limits.nofile;
  config.fsize_bytes = spec.limits.fsize_bytes;
  config.stack_bytes = spec.limits.stack_bytes;
  config.new_root = scratch.new_root();
  config.upper_dir = scratch.upper();
  config.work_dir = scratch.work();
  std::size_t next_layer = 0;
  for (; next_layer < spec.rootfs_layers.size(); ++next_layer) {
    config.lower_dirs.push_back(scratch.lower(next_layer));
    config.layers.push_back(AttachedMount{scratch.lower(next_layer), false});
  }
  for (const auto& overlay : overlays) {
    OverlayConfig view{{}, overlay.upper_dir, overlay.work_dir, scratch.new_root() + overlay.target};
    for (std::size_t i = 0; i < overlay.layers.size(); ++i, ++next_layer) {
      view.lower_dirs.push_back(scratch.lower(next_layer));
      config.layers.push_back(AttachedMount{scratch.lower(next_layer), false});
    }
    config.overlays.push_back(std::move(view));
  }
  for (const auto& bind : spec.mounts) {
    config.binds.push_back(AttachedMount{scratch.new_root() + bind.target, !std::filesystem::is_directory(bind.source)});
  }
  config.seccomp_program_hex = program_hex;
  return config;
}

// Upper and work dirs of a copy-on-write view must belong to sandbox root for overlayfs in its namespace.
void prepare_overlay_dirs(const OverlayMount& overlay, std::uint32_t root_id) {
  for (const std::string& dir : {overlay.upper_dir, overlay.work_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw SandboxError(base::Cause{"overlay", dir, ec.value(), "create"});
    if (chown(dir.c_str(), root_id, root_id) != 0) throw_errno("overlay", dir, "chown");
  }
}

Status classify(const Outcome& outcome, const CgroupUsage& usage, std::string* reason, const Limits& limits) {
  if (outcome.cancelled) {
    *reason = "cancelled";
    return Status::kCancelled;
  }
  if (outcome.wall_timeout) {
    *reason = "wall time limit of " + std::to_string(limits.wall_time.count()) + " ms exceeded";
    return Status::kTimedOut;
  }
  if (outcome.cpu_timeout) {
    *reason = "cpu time limit of " + std::to_string(limits.cpu_time.count()) + " ms exceeded";
    return Status::kTimedOut;
  }
  if (outcome.setup_error) {
    *reason = outcome.setup_error->describe();
    return Status::kSetupFailed;
  }
  if (usage.oom_kills > 0 && (!outcome.exit_code || *outcome.exit_code != 0)) {
    *reason = "memory limit of " + std::to_string(limits.memory_bytes) + " bytes exceeded (OOM kill)";
    return Status::kOomKilled;
  }
  if (outcome.exit_signal) {
    *reason = std::string("killed by signal ") + strsignal(*outcome.exit_signal);
    return Status::kSignaled;
  }
  if (outcome.exit_code) {
    *reason = *outcome.exit_code == 0 ? "" : "exited with code " + std::to_string(*outcome.exit_code);
    return *outcome.exit_code == 0 ? Status::kSucceeded : Status::kFailed;
  }
  if (outcome.init_wait_code == CLD_EXITED) {
    const char* known = describe_child_exit(outcome.init_wait_status);
    *reason = known ? known : "sandbox init exited with code " + std::to_string(outcome.init_wait_status) +
                                  " before reporting";
    return known ? Status::kSetupFailed : Status::kInternalError;
  }
  *reason = std::string("sandbox init killed by signal ") + strsignal(outcome.init_wait_status);
  return Status::kInternalError;
}

}  // namespace

Launcher::Launcher(LauncherOptions options) : state_(std::make_unique<State>()) {
  if (options.init_binary.empty()) options.init_binary = default_init_binary();
  state_->init_exe.reset(open(options.init_binary.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state_->init_exe) throw_errno("launcher", options.init_binary, "open capsule-init");
  state_->cgroups = detect_cgroups(options.cgroup);
  state_->options = std::move(options);
}

Launcher::~Launcher() = default;

std::size_t Launcher::remove_leftovers() {
  std::set<std::string> ids;
  for (const std::string& name : state_->cgroups->list()) {
    ids.insert(name);
    state_->cgroups->open(name)->remove();
  }
  // Disks (and their binds) of dead sandboxes: detached first, so nothing below is walked through a mount.
  detach_mounts_below(state_->options.scratch_dir);
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(state_->options.scratch_dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(".")) ids.insert(name);  // .disk-templates is no sandbox
    std::error_code ignored;
    std::filesystem::remove_all(it->path(), ignored);
  }
  return ids.size();
}

void Launcher::remove_cgroup_parent() { state_->cgroups->remove_parent(); }

int Launcher::cgroup_version() const { return state_->cgroups->version(); }
const LauncherOptions& Launcher::options() const { return state_->options; }

struct StartedSandbox::Parts {
  // Destroyed bottom-up: the supervisor closes its descriptors, the guard kills and reaps init, then the
  // cgroup and the scratch directory go.
  Limits limits;
  std::unique_ptr<OutputCapture> out;
  std::unique_ptr<OutputCapture> err;
  std::unique_ptr<ScratchDir> scratch;
  std::unique_ptr<Cgroup> cgroup;
  ChildGuard guard;
  std::unique_ptr<Supervisor> supervisor;
  std::vector<base::UniqueFd> listeners;
  std::int64_t t_start = 0, t_prepared = 0, t_cloned = 0, t_mapped = 0;
};

StartedSandbox::StartedSandbox(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
StartedSandbox::~StartedSandbox() = default;
Supervisor& StartedSandbox::supervisor() { return *parts_->supervisor; }
std::vector<base::UniqueFd> StartedSandbox::take_listeners() { return std::move(parts_->listeners); }

std::unique_ptr<StartedSandbox> Launcher::start(const SandboxSpec& spec, const RunHooks& hooks) {
  auto parts = std::make_unique<StartedSandbox::Parts>();
  parts->t_start = monotonic_ns();
  parts->limits = spec.limits;
  validate_spec(spec, state_->options.host_id_count);
  const std::string program_hex =
      spec.seccomp_profile.empty() ? std::string() : to_hex(state_->seccomp_program(spec.seccomp_profile));
  parts->out = std::make_unique<OutputCapture>(spec.limits.output_cap_bytes, spec.stdout_spill_path);
  parts->err = std::make_unique<OutputCapture>(spec.limits.output_cap_bytes, spec.stderr_spill_path);

  const std::string id = new_sandbox_id();
  const std::uint32_t root_id = state_->options.host_id_base;
  std::vector<std::string> layers = spec.rootfs_layers;
  // Whose rights each layer is read with: host owners as they are, or an overlay's layers_owner.
  std::vector<std::optional<std::pair<std::uint32_t, std::uint32_t>>> layer_owners(layers.size());
  for (const auto& overlay : spec.overlays) {
    layers.insert(layers.end(), overlay.layers.begin(), overlay.layers.end());
    layer_owners.insert(layer_owners.end(), overlay.layers.size(), overlay.layers_owner);
    prepare_overlay_dirs(overlay, root_id);
  }
  parts->scratch = std::make_unique<ScratchDir>(state_->options.scratch_dir, id, layers.size(), spec.upper_dir,
                                                root_id, DiskLimits{spec.limits.disk_bytes, spec.limits.disk_inodes});
  const std::vector<OverlayMount> overlays = place_overlays_on_disk(spec, *parts->scratch, root_id);
  parts->cgroup =
      state_->cgroups->create(id, CgroupLimits{spec.limits.memory_bytes, spec.limits.pids, spec.limits.cpus});

  Pipe stdin_pipe = make_stdin(spec.stdin_data.has_value());
  Pipe stdout_pipe = make_pipe();
  Pipe stderr_pipe = make_pipe();
  auto [control_parent, control_child] = make_channel();
  base::UniqueFd control(control_parent);
  base::UniqueFd control_for_child(control_child);
  Pipe go = make_pipe();
  parts->t_prepared = monotonic_ns();

  char init_name[] = "capsule-init";
  char* init_argv[] = {init_name, nullptr};
  char* init_envp[] = {nullptr};
  ChildFds child_fds{stdin_pipe.read_end.get(), stdout_pipe.write_end.get(), stderr_pipe.write_end.get(),
                     control_for_child.get(), state_->init_exe.get(), go.read_end.get()};
  ClonedChild child = clone_sandbox_child(child_fds, init_argv, init_envp);
  parts->guard.pidfd = child.pidfd;
  parts->t_cloned = monotonic_ns();
  stdin_pipe.read_end.reset();
  stdout_pipe.write_end.reset();
  stderr_pipe.write_end.reset();
  control_for_child.reset();
  go.read_end.reset();
  if (!spec.stdin_data) stdin_pipe.write_end.reset();

  write_id_maps(child.pid, IdRange{root_id, state_->options.host_id_count});
  parts->cgroup->add_process(child.pid);
  parts->listeners = listen_in_network_namespace(child.pid, spec.loopback_listeners);
  base::UniqueFd userns(open_user_namespace(child.pid));
  std::vector<base::UniqueFd> mounts;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    mounts.push_back(layer_owners[i] ? state_->owner_mapped_layer(layers[i], *layer_owners[i])
                                     : base::UniqueFd(make_detached_mount(layers[i], userns.get(), true, true, false)));
  }
  for (const auto& bind : spec.mounts) {
    mounts.push_back(bind.read_only ? base::UniqueFd(make_detached_mount(bind.source, userns.get(), bind.idmap, true, true))
                                    : state_->writable_bind(bind));
  }
  InitConfig init_config = make_init_config(spec, overlays, *parts->scratch, program_hex);
  if (spec.limits.wall_time.count() > 0) {
    // A second after the supervisor's own deadline, so that while capsuled runs it is the one that ends it.
    init_config.watchdog_ns = parts->t_start + (spec.limits.wall_time.count() + kWatchdogMarginMs) * 1000000;
    init_config.kill_grace_ms = spec.limits.kill_grace.count();
  }
  send_message(control.get(), encode_init_config(init_config));
  for (const auto& fd : mounts) send_fd(control.get(), fd.get());
  mounts.clear();
  if (write(go.write_end.get(), "g", 1) != 1) throw_errno("clone", "", "signalling the child");
  go.write_end.reset();
  parts->t_mapped = monotonic_ns();

  SupervisedFds fds{child.pidfd, control.release(), stdout_pipe.read_end.release(), stderr_pipe.read_end.release(),
                    stdin_pipe.write_end.release()};
  parts->supervisor = std::make_unique<Supervisor>(fds, *parts->cgroup, spec.limits, hooks,
                                                   spec.stdin_data.value_or(""), parts->t_start, *parts->out,
                                                   *parts->err);
  return std::unique_ptr<StartedSandbox>(new StartedSandbox(std::move(parts)));
}

Result StartedSandbox::finish() {
  Parts& p = *parts_;
  const Outcome& outcome = p.supervisor->outcome();
  Result result;
  CgroupUsage usage = p.cgroup->usage();
  result.status = classify(outcome, usage, &result.reason, p.limits);
  if (outcome.exit_code) result.exit_code = *outcome.exit_code;
  if (outcome.exit_signal) result.signal = *outcome.exit_signal;
  if (outcome.setup_error && outcome.setup_error->step == "exec") result.exit_code = 127;
  result.wall_ms = ms_between(p.t_start, outcome.end_ns);
  result.cpu_user_ms = static_cast<double>(usage.cpu_user_ns) / 1e6;
  result.cpu_sys_ms = static_cast<double>(usage.cpu_sys_ns) / 1e6;
  result.peak_memory_bytes = usage.peak_memory_bytes;
  result.oom_kills = usage.oom_kills;
  result.stdout_capture = p.out->finish();
  result.stderr_capture = p.err->finish();
  SetupTimings& setup = result.setup;
  setup.prepare_ms = ms_between(p.t_start, p.t_prepared);
  setup.clone_ms = ms_between(p.t_prepared, p.t_cloned);
  setup.maps_ms = ms_between(p.t_cloned, p.t_mapped);
  if (outcome.ready_ns) setup.mounts_ms = ms_between(p.t_mapped, *outcome.ready_ns);
  if (outcome.ready_ns && outcome.seccomp_ns) setup.seccomp_ms = ms_between(*outcome.ready_ns, *outcome.seccomp_ns);
  if (outcome.seccomp_ns && outcome.exec_ns) setup.exec_ms = ms_between(*outcome.seccomp_ns, *outcome.exec_ns);
  if (outcome.exec_ns) setup.total_ms = ms_between(p.t_start, *outcome.exec_ns);
  p.supervisor.reset();
  try {
    p.cgroup->remove();
  } catch (const SandboxError& e) {
    result.status = Status::kInternalError;
    result.reason += (result.reason.empty() ? "" : "; ") + std::string("cleanup: ") + e.what();
  }
  return result;
}

Result Launcher::setup_failure(const SandboxError& error, double wall_ms) {
  Result result;
  result.status = Status::kSetupFailed;
  result.reason = error.what();
  result.wall_ms = wall_ms;
  return result;
}

Result Launcher::run(const SandboxSpec& spec, const RunHooks& hooks) {
  const std::int64_t t_start = monotonic_ns();
  try {
    std::unique_ptr<StartedSandbox> sandbox = start(spec, hooks);
    sandbox->supervisor().run();
    return sandbox->finish();
  } catch (const SandboxError& e) {
    return setup_failure(e, ms_between(t_start, monotonic_ns()));
  } catch (const std::exception& e) {
    Result result;
    result.status = Status::kInternalError;
    result.reason = e.what();
    result.wall_ms = ms_between(t_start, monotonic_ns());
    return result;
  }
}

}  // namespace capsule::sandbox

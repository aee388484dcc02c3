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

#include "sandbox/box_reaper.h"
#include "sandbox/channel.h"
#include "sandbox/clone.h"
#include "sandbox/command.h"
#include "sandbox/copy_tree.h"
#include "sandbox/cpu_affinity.h"
#include "sandbox/error.h"
#include "sandbox/init_config.h"
#include "sandbox/net.h"
#include "sandbox/output.h"
#include "sandbox/pipes.h"
#include "sandbox/scratch.h"
#include "sandbox/seccomp.h"
#include "sandbox/net_namespace.h"
#include "sandbox/spawner.h"
#include "sandbox/supervisor.h"
#include "base/unique_fd.h"
#include "sandbox/userns.h"

namespace capsule::sandbox {

struct Launcher::State {
  LauncherOptions options;
  std::unique_ptr<CgroupManager> cgroups;
  std::vector<CgroupViewMount> cgroup_views;  // what every box mounts at /sys/fs/cgroup; fixed for the host
  base::UniqueFd init_exe;
  std::unique_ptr<Spawner> spawner;  // clones every box's init; needs init_exe
  std::mutex cache_mutex;
  std::map<std::string, std::string> seccomp_cache;  // profile text -> its raw BPF, as init receives it
  std::map<std::pair<uid_t, gid_t>, base::UniqueFd> owner_namespaces;  // writable-bind owner -> mapping userns
  std::unique_ptr<DiskBudget> disks;  // what the boxes' disks were promised, against the free space
  BoxReaper reaper;
  std::shared_ptr<StartGate> starts = std::make_shared<StartGate>();  // runs' and execs' starts, which the pool yields to
  std::mutex pool_mutex;
  std::unique_ptr<BoxPool> pool;  // last: it makes boxes through the members above, and goes first

  const std::string& seccomp_program(const std::string& profile);
  base::UniqueFd writable_bind(const BindMount& bind);
  base::UniqueFd owner_mapped_layer(const std::string& layer, std::pair<std::uint32_t, std::uint32_t> owner);
  // The user namespace mapping `uid`:`gid` to sandbox root and nothing else (kept for reuse). Under cache_mutex.
  int owner_namespace_locked(std::uint32_t uid, std::uint32_t gid);
};

const std::string& Launcher::State::seccomp_program(const std::string& profile) {
  std::lock_guard lock(cache_mutex);
  auto it = seccomp_cache.find(profile);
  if (it == seccomp_cache.end()) {
    const std::vector<std::uint8_t> program = compile_seccomp(parse_seccomp_profile(profile));
    it = seccomp_cache.emplace(profile, std::string(program.begin(), program.end())).first;
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

std::string default_init_binary() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("capsule-init") : (self.parent_path() / "capsule-init").string();
}

// With a disk limit, each copy-on-write view's upper and work dirs are the ones ScratchDir made on the sandbox's
// disk, and its upper is bind-mounted where the caller asked for it (it must be empty: nothing there would be seen).
std::vector<OverlayMount> place_overlays_on_disk(const EnvironmentSpec& spec, const ScratchDir& scratch) {
  std::vector<OverlayMount> placed = spec.overlays;
  SandboxDisk* disk = scratch.disk();
  if (disk == nullptr) return placed;
  for (std::size_t i = 0; i < placed.size(); ++i) {
    std::error_code ec;
    if (!std::filesystem::is_empty(placed[i].upper_dir, ec) || ec) {
      throw_error("disk", placed[i].upper_dir, "an overlay's upper dir must be empty with a disk limit");
    }
    const ScratchDir::UpperAndWork& on_disk = scratch.disk_overlays().at(i);
    disk->bind_to(on_disk.upper, placed[i].upper_dir);
    placed[i].upper_dir = on_disk.upper;
    placed[i].work_dir = on_disk.work;
  }
  return placed;
}

InitConfig make_init_config(const EnvironmentSpec& spec, const std::vector<OverlayMount>& overlays,
                            const ScratchDir& scratch, std::size_t program_bytes) {
  InitConfig config;
  config.hostname = spec.hostname;
  config.readonly_rootfs = spec.readonly_rootfs;
  config.tmp_size_bytes = spec.limits.tmp_size_bytes;
  config.protect = spec.protect;
  config.protect_base = spec.protect_base;
  config.session = spec.session;
  config.own_network = spec.network_namespace.empty();
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
  config.seccomp_program_bytes = program_bytes;
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

}  // namespace

Launcher::Launcher(LauncherOptions options) : state_(std::make_unique<State>()) {
  if (options.init_binary.empty()) options.init_binary = default_init_binary();
  state_->init_exe.reset(open(options.init_binary.c_str(), O_RDONLY | O_CLOEXEC));
  if (!state_->init_exe) throw_errno("launcher", options.init_binary, "open capsule-init");
  state_->spawner = std::make_unique<Spawner>(state_->init_exe.get());
  state_->cgroups = detect_cgroups(options.cgroup);
  state_->cgroup_views = state_->cgroups->view_mounts();
  state_->options = std::move(options);
  const LauncherOptions& made = state_->options;
  state_->disks = std::make_unique<DiskBudget>(made.data_dir.empty() ? made.scratch_dir : made.data_dir,
                                               made.disk_reserve_bytes);
  if (state_->options.pool.boxes_per_environment > 0) {
    state_->pool = std::make_unique<BoxPool>([this](const EnvironmentSpec& spec) { return create_box(spec, true); },
                                             state_->reaper, state_->options.pool, state_->starts);
  }
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
  for (const std::string& dir : {state_->options.scratch_dir, state_->options.data_dir}) {
    if (dir.empty()) continue;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // .disk-templates is no sandbox; a disk image (unlinked once attached) can only be a half-made disk's.
      if (!name.starts_with(".") && !name.ends_with(".img")) ids.insert(name);
      std::error_code ignored;
      std::filesystem::remove_all(it->path(), ignored);
    }
  }
  return ids.size();
}

void Launcher::remove_cgroup_parent() {
  {
    std::lock_guard lock(state_->pool_mutex);
    state_->pool.reset();
  }
  state_->reaper.drain();
  state_->cgroups->remove_parent();
}

void Launcher::drain_teardown() { state_->reaper.drain(); }

PoolStats Launcher::pool_stats() const {
  std::lock_guard lock(state_->pool_mutex);
  return state_->pool ? state_->pool->stats() : PoolStats{};
}

int Launcher::cgroup_version() const { return state_->cgroups->version(); }
const LauncherOptions& Launcher::options() const { return state_->options; }

StartedSandbox::~StartedSandbox() = default;

std::unique_ptr<DiskClaim> Launcher::claim_disk(const Limits& limits, bool for_pool) {
  if (limits.disk_bytes == 0) return nullptr;
  const std::uint64_t bytes = disk_image_bytes(with_default_inodes({limits.disk_bytes, limits.disk_inodes}));
  if (for_pool) return state_->disks->claim(bytes, bytes);
  try {
    return state_->disks->claim(bytes);
  } catch (const SandboxError& e) {
    if (e.code() != "insufficient_storage") throw;
    std::vector<std::unique_ptr<Sandbox>> waiting;
    {
      std::lock_guard lock(state_->pool_mutex);
      if (state_->pool) waiting = state_->pool->shed();
    }
    if (waiting.empty()) throw;
    waiting.clear();  // destroyed here, their disks detached: what they were promised is free again
    return state_->disks->claim(bytes);
  }
}

void Launcher::require_disk_room(const Limits& limits, DiskRoom when) {
  if (limits.disk_bytes == 0) return;
  if (when == DiskRoom::kNow) {
    claim_disk(limits, false);  // claimed and given back at once
    return;
  }
  const std::uint64_t bytes = disk_image_bytes(with_default_inodes({limits.disk_bytes, limits.disk_inodes}));
  DiskBudget alone(state_->disks->dir(), state_->options.disk_reserve_bytes);
  alone.claim(bytes);
}

std::unique_ptr<Sandbox> Launcher::create(const EnvironmentSpec& spec) { return create_box(spec, false); }

std::unique_ptr<Sandbox> Launcher::create_box(const EnvironmentSpec& spec, bool for_pool) {
  std::unique_ptr<Sandbox> box(new Sandbox());
  BoxTimes& times = box->times_;
  times.start = monotonic_ns();
  validate_environment(spec);
  box->environment_ = spec;
  box->host_id_base_ = state_->options.host_id_base;
  box->host_id_count_ = state_->options.host_id_count;
  box->starts_ = state_->starts;
  static const std::string kNoProgram;
  const std::string& program = spec.seccomp_profile.empty() ? kNoProgram : state_->seccomp_program(spec.seccomp_profile);

  const std::string id = new_sandbox_id();
  box->id_ = id;
  const std::uint32_t root_id = state_->options.host_id_base;
  std::vector<std::string> layers = spec.rootfs_layers;
  // Whose rights each layer is read with: host owners as they are, or an overlay's layers_owner.
  std::vector<std::optional<std::pair<std::uint32_t, std::uint32_t>>> layer_owners(layers.size());
  for (const auto& overlay : spec.overlays) {
    layers.insert(layers.end(), overlay.layers.begin(), overlay.layers.end());
    layer_owners.insert(layer_owners.end(), overlay.layers.size(), overlay.layers_owner);
    prepare_overlay_dirs(overlay, root_id);
  }
  box->disk_claim_ = claim_disk(spec.limits, for_pool);
  box->scratch_ = std::make_unique<ScratchDir>(state_->options.scratch_dir, id, layers.size(), spec.upper_dir,
                                               root_id, DiskLimits{spec.limits.disk_bytes, spec.limits.disk_inodes},
                                               state_->options.data_dir, spec.overlays.size());
  if (box->disk_claim_ && box->scratch_->disk() != nullptr) box->disk_claim_->attach(box->scratch_->disk()->image_fd());
  const std::vector<OverlayMount> overlays = place_overlays_on_disk(spec, *box->scratch_);
  for (const auto& overlay : overlays) {
    if (!overlay.seed_dir.empty()) copy_tree_contents(overlay.seed_dir, overlay.upper_dir);
  }
  box->cgroup_ =
      state_->cgroups->create(id, CgroupLimits{spec.limits.memory_bytes, spec.limits.pids, spec.limits.cpus});

  auto [control_parent, control_child] = make_channel();
  base::UniqueFd control(control_parent);
  base::UniqueFd control_for_child(control_child);
  base::UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null_fd) throw_errno("clone", "/dev/null", "open");
  Pipe go = make_pipe();
  times.prepared = monotonic_ns();

  // Init's own stdio is /dev/null: each exec brings its own pipes over the control channel.
  base::UniqueFd network;  // a joined namespace (a stack's), checked to be one before anything is cloned
  if (!spec.network_namespace.empty()) network = open_network_namespace(spec.network_namespace);
  ChildFds child_fds{null_fd.get(), null_fd.get(), null_fd.get(), control_for_child.get(), state_->init_exe.get(),
                     go.read_end.get(), network.get()};
  ClonedChild child = state_->spawner->spawn(child_fds);
  box->init_pid_ = child.pid;
  box->pidfd_ = child.pidfd;
  box->init_alive_ = true;
  times.cloned = monotonic_ns();
  control_for_child.reset();
  go.read_end.reset();
  null_fd.reset();

  write_id_maps(child.pid, IdRange{root_id, state_->options.host_id_count});
  box->cgroup_->add_process(child.pid);
  confine_to_cpus(child.pid, spec.limits.cpus);
  box->listeners_ = listen_in_network_namespace(child.pid, spec.loopback_listeners);
  base::UniqueFd userns(open_user_namespace(child.pid));
  // What init receives after its config, in order: the seccomp program, layer mounts, bind mounts, its v2 leaf.
  std::vector<base::UniqueFd> passed;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    passed.push_back(layer_owners[i] ? state_->owner_mapped_layer(layers[i], *layer_owners[i])
                                     : base::UniqueFd(make_detached_mount(layers[i], userns.get(), true, true, false)));
  }
  for (const auto& bind : spec.mounts) {
    passed.push_back(bind.read_only ? base::UniqueFd(make_detached_mount(bind.source, userns.get(), bind.idmap, true, true))
                                    : state_->writable_bind(bind));
  }
  InitConfig init_config = make_init_config(spec, overlays, *box->scratch_, program.size());
  init_config.cgroup_views = state_->cgroup_views;
  if (const std::string leaf = box->cgroup_->init_leaf_procs_file(); !leaf.empty()) {
    passed.emplace_back(open(leaf.c_str(), O_WRONLY | O_CLOEXEC));
    if (!passed.back()) throw_errno("cgroup", leaf, "open");
    init_config.join_init_leaf = true;
  }
  send_message(control.get(), encode_init_config(init_config));
  if (!program.empty()) send_message(control.get(), program);
  for (const auto& fd : passed) send_fd(control.get(), fd.get());
  passed.clear();
  if (write(go.write_end.get(), "g", 1) != 1) throw_errno("clone", "", "signalling the child");
  go.write_end.reset();
  box->control_ = control.release();
  times.mapped = monotonic_ns();
  return box;
}

std::unique_ptr<Sandbox> Launcher::take_or_create(const EnvironmentSpec& spec) {
  {
    std::lock_guard lock(state_->pool_mutex);
    if (state_->pool) {
      if (std::unique_ptr<Sandbox> box = state_->pool->take(spec)) return box;
    }
  }
  return create(spec);
}

std::unique_ptr<StartedSandbox> Launcher::start(const SandboxSpec& spec, const RunHooks& hooks) {
  validate_spec(spec, state_->options.host_id_count);
  std::unique_ptr<StartedSandbox> started(new StartedSandbox());
  const EnvironmentSpec environment = environment_of(spec);
  const StartGate::Ticket making_the_box = state_->starts->enter();  // the exec holds its own from its request on
  started->box_ = take_or_create(environment);
  const ProcessSpec process = process_of(spec);
  if (started->box_->times().taken != 0) {
    try {
      started->exec_ = started->box_->exec(process, hooks);
    } catch (const SandboxError&) {
      // The pooled box ended between its last check and this exec: the run gets a box made for it instead.
      state_->reaper.adopt(std::move(started->box_));
      started->box_ = create(environment);
    }
  }
  if (!started->exec_) started->exec_ = started->box_->exec(process, hooks);
  started->supervisor_ = std::make_unique<Supervisor>(*started->box_, *started->exec_);
  return started;
}

Result StartedSandbox::finish() {
  Result result = exec_->finish();
  const BoxTimes& times = box_->times();
  const ExecOutcome& outcome = exec_->outcome();
  // Setup is the box's: its steps, then the exec's seccomp and execve. A box from the pool was set up before its
  // run: its run starts when it was taken, and only the exec's steps are its own.
  SetupTimings& setup = result.setup;
  setup.pooled = times.taken != 0;
  const std::int64_t run_start = setup.pooled ? times.taken : times.start;
  if (!setup.pooled) {
    setup.prepare_ms = ms_between(times.start, times.prepared);
    setup.clone_ms = ms_between(times.prepared, times.cloned);
    setup.maps_ms = ms_between(times.cloned, times.mapped);
    if (times.ready != 0) setup.mounts_ms = ms_between(times.mapped, times.ready);
  }
  const std::int64_t exec_start = setup.pooled ? times.taken : times.ready;
  if (exec_start != 0 && outcome.seccomp_ns) setup.seccomp_ms = ms_between(exec_start, *outcome.seccomp_ns);
  if (outcome.exec_ns) setup.total_ms = ms_between(run_start, *outcome.exec_ns);
  if (outcome.end_ns != 0) result.wall_ms = ms_between(run_start, outcome.end_ns);
  if (outcome.box_ended && !outcome.cancelled && !outcome.wall_timeout && !outcome.cpu_timeout) {
    // The box never ran the command: init reported why, or died without a word.
    if (const auto& error = box_->setup_error()) {
      result.status = Status::kSetupFailed;
      result.reason = error->describe();
    } else if (box_->init_wait_code() == CLD_EXITED) {
      const char* known = describe_child_exit(box_->init_wait_status());
      result.status = known ? Status::kSetupFailed : Status::kInternalError;
      result.reason = known ? known : "sandbox init exited with code " + std::to_string(box_->init_wait_status()) +
                                          " before reporting";
    } else if (box_->init_wait_status() == SIGKILL && result.oom_kills > 0) {
      // The OOM killer took init: its commands are its first choice (oom_guard.h), unless one lowered its own
      // score or raised init's. The box ran out of its own memory all the same: the command's outcome.
      result.status = Status::kOomKilled;
      result.reason = "memory limit of " + std::to_string(box_->environment().limits.memory_bytes) +
                      " bytes exceeded (OOM kill of the sandbox's init)";
    } else {
      result.status = Status::kInternalError;
      result.reason = std::string("sandbox init killed by signal ") + strsignal(box_->init_wait_status());
    }
  }
  // The box, and the exec with its cgroup, stay until this object goes: until then its caller reads the
  // workspace's changes, and the answer goes out before the five rmdirs of a v1 exec cgroup are paid.
  return result;
}

bool Launcher::has_ready_box(const SandboxSpec& spec) const {
  const EnvironmentSpec environment = environment_of(spec);
  std::lock_guard lock(state_->pool_mutex);
  return state_->pool && state_->pool->has_ready(environment);
}

StartGate::Ticket Launcher::hold_starts() { return state_->starts->enter(); }

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
    std::unique_ptr<StartedSandbox> sandbox = start(spec, hooks);  // create (or take) + exec
    sandbox->supervisor().run();
    Result result = sandbox->finish();
    // The exec refers to its box: it goes first, here, and the box to the reaper (the Result does not wait
    // for the box's teardown).
    sandbox->supervisor_.reset();
    sandbox->exec_.reset();
    state_->reaper.adopt(std::move(sandbox->box_));
    return result;
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

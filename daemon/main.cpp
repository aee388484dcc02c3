// capsuled: the capsule daemon. Removes what a previous instance left (before writing anything), then serves
// the API on a Unix socket; SIGTERM/SIGINT drain (no new runs; running ones finish or are cancelled later).
#include <fcntl.h>
#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include <CLI/CLI.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/thread_name.h"
#include "daemon/api/api.h"
#include "daemon/config.h"
#include "daemon/api/images_api.h"
#include "daemon/logs/retention.h"
#include "daemon/bundle/bundle_stores.h"
#include "daemon/snapshots/snapshot_store.h"
#include "daemon/stacks/stack_manager.h"
#include "daemon/state_recovery.h"
#include "http/router.h"
#include "http/server.h"
#include "images/host_image.h"
#include "install_layout.h"
#include "proxy/package_proxy.h"
#include "proxy/proxy_options.h"
#include "sandbox/launcher.h"
#include "sandbox/quota.h"

namespace {

namespace daemon = capsule::daemon;
namespace fs = std::filesystem;

std::optional<gid_t> group_id(const std::string& name) {
  if (name.empty()) return std::nullopt;
  const group* g = getgrnam(name.c_str());
  return g ? std::optional<gid_t>(g->gr_gid) : std::nullopt;
}

// Held for the daemon's lifetime: a second capsuled on the same state dir would take this one's sandboxes
// for leftovers of a crash and kill them.
int lock_state_dir(const std::string& state) {
  const std::string path = state + "/capsuled.lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    throw std::runtime_error("another capsuled is using the state dir " + state + " (" + path + " is locked)");
  }
  return fd;
}

// Sandbox setup runs as the unprivileged mapped ids and walks into <state>/scratch, so every directory on
// the way must be searchable by others; a 0700 ancestor (e.g. from mkdtemp) would fail every run.
void check_state_dir_reachable(const std::string& state) {
  for (fs::path dir = fs::path(state).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat st {};
    if (stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
      throw std::runtime_error("state dir " + state + ": " + dir.string() +
                               " is not searchable by other users (sandboxes run as unprivileged ids); "
                               "chmod o+x it or choose another state dir");
    }
    if (dir == dir.root_path()) break;
  }
}

// A directory of the state dir, private to root: `group` (the sandboxes' ids) may only search it when the
// sandbox setup walks through it (scratch, runs); nobody else may list or enter it.
void make_private_dir(const std::string& path, mode_t mode, gid_t group = 0) {
  fs::create_directories(path);
  if (chown(path.c_str(), 0, group) != 0 || chmod(path.c_str(), mode) != 0) {
    throw std::runtime_error("cannot make " + path + " private: " + std::strerror(errno));
  }
}

// Boxes' scratch dirs (mount points, a few dirs each) are made and removed for every run: on a tmpfs that costs
// next to nothing, where on the state disk each inode allocation scans for recently deleted ones (ext4) and each
// removal may wait for a discard. Nothing a sandbox writes lands here (data_dir). It also holds images/, what
// capsuled derives at start (the host image's skeleton, ~2 MB). Unmounted when capsuled ends, however it ends;
// one left by a killed capsuled goes with its leftovers.
class ScratchTmpfs {
 public:
  ScratchTmpfs() = default;
  ~ScratchTmpfs() {
    if (!path_.empty()) umount2(path_.c_str(), MNT_DETACH);
  }
  ScratchTmpfs(const ScratchTmpfs&) = delete;
  ScratchTmpfs& operator=(const ScratchTmpfs&) = delete;

  void mount_at(const std::string& path, std::uint32_t group) {
    const std::string options = "mode=0710,uid=0,gid=" + std::to_string(group) + ",size=64m,nr_inodes=262144";
    if (mount("capsule-scratch", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options.c_str()) != 0) {
      throw std::runtime_error("cannot mount a tmpfs at " + path + ": " + std::strerror(errno));
    }
    path_ = path;
  }

 private:
  std::string path_;
};

// Each sandbox's writable layers get a disk of their own (sandbox/quota.h). One is made now, so a host where
// that cannot work says so at start, loudly; runs with a disk limit (the default) then fail their setup.
void probe_sandbox_disks(const std::string& scratch, const std::string& images, std::uint32_t owner) {
  const std::string dir = scratch + "/disk-probe";
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  try {
    fs::create_directories(dir);
    capsule::sandbox::SandboxDisk probe(dir, {capsule::sandbox::kMinDiskBytes, capsule::sandbox::kMinDiskInodes},
                                        owner, images);
    spdlog::info("sandbox disk limits: per-sandbox ext4 disks work ({})", probe.root());
  } catch (const std::exception& e) {
    spdlog::critical("SANDBOX DISK LIMITS ARE UNAVAILABLE: {}. Every run with a disk limit (the default) will "
                     "fail its setup rather than run without one.", e.what());
  }
  fs::remove_all(dir, ignored);
}

// What the config leaves empty comes from the install: capsule-init and the data dir (policies/, data/) where
// the install layout puts them relative to this capsuled (install_layout.h; the build tree mirrors it).
capsule::sandbox::LauncherOptions installed_defaults(daemon::DaemonConfig& config) {
  namespace layout = capsule::install_layout;
  const std::string data_dir = layout::beside_this_executable(layout::kDataFromDaemon);
  if (config.policies_dir.empty()) config.policies_dir = data_dir + "/policies";
  if (config.python_releases.empty()) config.python_releases = data_dir + "/data/python-releases.json";
  capsule::sandbox::LauncherOptions launcher_options;
  launcher_options.init_binary = layout::beside_this_executable(layout::kInitFromDaemon);
  spdlog::info("capsule-init {}, policies {}, python releases {}", launcher_options.init_binary,
               config.policies_dir, config.python_releases);
  return launcher_options;
}

int serve(daemon::DaemonConfig config) {
  config.state_dir = fs::absolute(config.state_dir).lexically_normal().string();
  if (config.state_dir.size() > 1 && config.state_dir.back() == '/') config.state_dir.pop_back();
  if (config.cgroup_parent.empty()) config.cgroup_parent = daemon::cgroup_parent_for(config.state_dir);
  const std::string state = config.state_dir;
  check_state_dir_reachable(state);
  fs::create_directories(state);
  chmod(state.c_str(), 0711);
  const int lock_fd = lock_state_dir(state);

  capsule::sandbox::LauncherOptions launcher_options = installed_defaults(config);
  launcher_options.scratch_dir = state + "/scratch";  // a tmpfs (mount_scratch): boxes' dirs and mount points
  launcher_options.data_dir = state + "/disks";       // what sandboxes write: their disk images, on the disk
  launcher_options.host_id_base = config.host_id_base;
  // The boxes' disks are promised no more than the state filesystem has beyond the watermark (DiskBudget).
  launcher_options.disk_reserve_bytes = config.storage.min_free_bytes;
  launcher_options.cgroup.parent = config.cgroup_parent;
  launcher_options.cgroup.parent_cpu_weight = daemon::parent_cpu_weight(config);
  launcher_options.pool = {config.pool_boxes, config.pool_environments, std::chrono::seconds(config.pool_idle_ttl_s),
                           [state, watermark = config.storage] { return !daemon::storage_shortage(state, watermark); }};
  ScratchTmpfs scratch_tmpfs;  // goes after the launcher, whose reaper may still be removing boxes' dirs
  capsule::sandbox::Launcher launcher(launcher_options);
  // What a previous capsuled left, removed before this one writes anything: on a full filesystem the leftovers
  // are what fills it, and the ledger, logs and images need room.
  daemon::recover_state_dir(launcher, state);

  // Traversed by the sandboxes' mapped ids at setup: search only, for them only. The rest: root only.
  make_private_dir(state + "/scratch", 0710, config.host_id_base);
  scratch_tmpfs.mount_at(state + "/scratch", config.host_id_base);
  make_private_dir(state + "/disks", 0710, config.host_id_base);
  make_private_dir(state + "/runs", 0710, config.host_id_base);
  make_private_dir(state + "/sessions", 0710, config.host_id_base);
  for (const char* sub : {"/logs", "/store", "/outputs"}) make_private_dir(state + sub, 0700);
  // Derived files only (the host image's skeleton, the test-order plugin), rebuilt at every start: 880 entries
  // take ~2 s on a disk with 1-2 ms per file creation and ~10 ms on the tmpfs.
  const std::string derived_images = state + "/scratch/images";
  make_private_dir(derived_images, 0700);
  if (fs::exists(state + "/proxy-cache")) make_private_dir(state + "/proxy-cache", 0700);
  probe_sandbox_disks(state + "/scratch", state + "/disks", config.host_id_base);
  if (auto shortage = daemon::storage_shortage(state, config.storage)) {
    spdlog::warn("{}: new runs are refused until space is freed", *shortage);
  }
  fs::create_directories(fs::path(config.socket_path).parent_path());
  capsule::images::prepare_host_image(derived_images);

  daemon::Ledger ledger(state + "/ledger.db");
  for (const char* file : {"/ledger.db", "/ledger.db-wal", "/ledger.db-shm"}) chmod((state + file).c_str(), 0600);
  for (const std::string& id : ledger.mark_unfinished_interrupted(daemon::unix_ms())) {
    spdlog::warn("run {} was interrupted by a daemon restart", id);
  }
  for (const std::string& id : ledger.mark_live_sessions_lost(daemon::unix_ms())) {
    spdlog::warn("session {} was lost with the daemon restart (its sandbox was removed)", id);
  }
  daemon::LogStore logs(state + "/logs", daemon::LogStoreOptions{config.log_cap_bytes});
  ledger.set_finished_observer([&logs](const std::string& id) { logs.run_ended(id); });  // log followers end
  const daemon::RetentionPolicy retention{config.retention_max_age_days, config.retention_max_total_bytes,
                                          std::chrono::seconds(config.retention_interval_s)};
  try {
    daemon::apply_retention(ledger, logs, retention, daemon::unix_ms());
  } catch (const std::exception& e) {
    spdlog::warn("retention at start: {}", e.what());
  }
  daemon::AccessPolicy access;  // who sees every run and image
  if (!config.admin_group.empty()) {
    access.admin_gid = group_id(config.admin_group);
    if (!access.admin_gid) throw std::runtime_error("admin_group: no group named '" + config.admin_group + "'");
  }
  capsule::images::ImageStore store(state + "/store");
  daemon::RunOutputs outputs(state + "/outputs", config.outputs, &store);
  daemon::sweep_outputs(outputs, ledger, daemon::unix_ms());
  // Before the runs and sessions that hold its leases, and the sweeper that collects unused snapshots.
  daemon::SnapshotStore snapshots(state + "/snapshots", {}, config.storage);
  daemon::sweep_snapshots(snapshots, ledger, config.snapshots, daemon::unix_ms());
  daemon::RetentionSweeper retention_sweeper(ledger, logs, retention, &outputs, {&snapshots, config.snapshots});
  daemon::RunManagerOptions run_options;
  run_options.outputs = &outputs;
  run_options.max_concurrent = config.max_concurrent;
  run_options.max_queue = config.max_queue;
  run_options.state_dir = state;
  run_options.storage = config.storage;
  run_options.runs_dir = state + "/runs";
  run_options.images_dir = derived_images;
  run_options.policies_dir = config.policies_dir;
  const auto python_releases = capsule::images::PythonReleases::load(config.python_releases);
  run_options.images = {&store, &python_releases, access};
  boost::asio::io_context io;
  capsule::proxy::PackageProxy package_proxy(capsule::proxy::parse_proxy_options(config.proxy, state + "/proxy-cache"));
  run_options.proxies = {&io, &package_proxy};
  spdlog::info("package proxy for network \"proxy\" runs: {}", package_proxy.options().to_json().dump());
  daemon::RunManager runs(launcher, ledger, logs, run_options);
  daemon::SessionManagerOptions session_options;
  session_options.state_dir = state;
  session_options.storage = config.storage;
  session_options.sessions_dir = state + "/sessions";
  session_options.images_dir = run_options.images_dir;
  session_options.policies_dir = run_options.policies_dir;
  session_options.images = run_options.images;
  session_options.limits = config.limits;
  session_options.proxies = run_options.proxies;
  daemon::SessionManager sessions(launcher, ledger, logs, session_options);
  daemon::StackManagerOptions stack_options{state + "/stacks", state + "/netns", config.max_stacks};
  stack_options.relay.idle_timeout = std::chrono::seconds(config.published_port_idle_timeout_s);
  daemon::StackManager stacks(sessions, stack_options);
  daemon::ImageJobs image_jobs;

  capsule::http::Router router;
  daemon::ApiContext context{io, runs, ledger, logs, config.limits, launcher.cgroup_version(), {}, sessions};
  context.images = run_options.images;
  context.snapshots = &snapshots;
  capsule::store::BlobStore proxy_blobs(package_proxy.options().cache_dir);  // the cache frozen replays serve from
  daemon::BundleStores bundles(store, proxy_blobs, state + "/bundle-staging");
  context.bundles = &bundles;
  context.stacks = &stacks;
  context.access = access;
  daemon::register_api(router, context);
  daemon::register_images_api(router, store, image_jobs, context.access);
  capsule::http::HttpServer server(io, router);
  server.listen_unix(config.socket_path, 0660, group_id(config.socket_group));
  spdlog::info("capsuled {} listening on {} (state {}, cgroup v{} under {} weighing {} processes, {} concurrent)",
               daemon::kCapsuleVersion, config.socket_path, state, launcher.cgroup_version(), config.cgroup_parent,
               daemon::parent_cpu_weight(config), config.max_concurrent);

  // io.run() must not return on its own once the listener closes: answers still being written need it.
  auto keep_running = boost::asio::make_work_guard(io);
  std::thread drainer;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    spdlog::info("signal {}: draining (grace {} ms)", signo, config.drain_grace_ms);
    drainer = std::thread([&] {
      runs.drain(std::chrono::milliseconds(config.drain_grace_ms));
      context.transfers.stop();  // file transfers give up at their next piece (503), before their boxes go
      stacks.stop();             // its threads end their services' sessions while the session thread runs
      sessions.stop();
      context.session_calls.stop();  // what waits on a session fails at once now
      context.snapshot_calls.stop();  // creations under way finish (their tools are bounded by timeouts)
      server.stop();
      // Answers already posted (a ?wait=true run object, the end of an event stream) are still to be
      // written; stopping the io_context at once would drop those clients' connections.
      for (int i = 0; i < 100 && server.active_connections() > 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      io.stop();
    });
  });
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([&] {
      capsule::base::name_this_thread("http-io");
      io.run();
    });
  }
  for (auto& worker : workers) worker.join();
  if (drainer.joinable()) drainer.join();
  context.transfers.stop();  // a stop without the drainer (io ended otherwise): the boxes go before their parent
  stacks.stop();
  sessions.stop();
  context.session_calls.stop();
  launcher.remove_cgroup_parent();
  close(lock_fd);
  spdlog::info("capsuled stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"capsuled: the capsule sandbox daemon"};
  daemon::DaemonConfig config;
  std::string config_file;
  app.add_option("--config", config_file, "JSON configuration file");
  auto* socket = app.add_option("--socket", config.socket_path, "Unix socket to listen on")->capture_default_str();
  auto* state = app.add_option("--state-dir", config.state_dir, "state directory")->capture_default_str();
  auto* concurrent = app.add_option("--max-concurrent", config.max_concurrent, "sandboxes running at once");
  auto* queue = app.add_option("--max-queue", config.max_queue, "runs waiting beyond that");
  auto* pool = app.add_option("--pool-boxes", config.pool_boxes,
                              "boxes kept ready per environment runs ask for (0: none)")
                  ->check(CLI::Range(0, 64))
                  ->capture_default_str();
  auto* policies = app.add_option("--policies-dir", config.policies_dir, "seccomp profiles (<name>.json)");
  auto* grace = app.add_option("--drain-grace-ms", config.drain_grace_ms, "SIGTERM: time before cancelling runs");
  auto* cgroup_parent = app.add_option("--cgroup-parent", config.cgroup_parent,
                                       "cgroup (in each hierarchy) holding the sandboxes' cgroups; default: "
                                       "capsule, or capsule-<hash> for a non-default state dir");
  bool foreground = true;  // the only mode; accepted so service managers and the CLI can say it
  app.add_flag("--foreground", foreground, "run in the foreground");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!config_file.empty()) {
      // The file gives the base; flags given on the command line win over it.
      daemon::DaemonConfig from_file;
      daemon::load_config_file(config_file, from_file);
      if (!*socket) config.socket_path = from_file.socket_path;
      if (!*state) config.state_dir = from_file.state_dir;
      if (!*concurrent) config.max_concurrent = from_file.max_concurrent;
      if (!*queue) config.max_queue = from_file.max_queue;
      if (!*pool) config.pool_boxes = from_file.pool_boxes;
      config.pool_environments = from_file.pool_environments;
      config.pool_idle_ttl_s = from_file.pool_idle_ttl_s;
      config.max_stacks = from_file.max_stacks;
      config.published_port_idle_timeout_s = from_file.published_port_idle_timeout_s;
      if (!*policies) config.policies_dir = from_file.policies_dir;
      if (!*grace) config.drain_grace_ms = from_file.drain_grace_ms;
      config.socket_group = from_file.socket_group;
      config.admin_group = from_file.admin_group;
      config.host_id_base = from_file.host_id_base;
      if (!*cgroup_parent) config.cgroup_parent = from_file.cgroup_parent;
      config.limits = from_file.limits;
      config.storage = from_file.storage;
      config.python_releases = from_file.python_releases;
      config.proxy = from_file.proxy;
      config.log_cap_bytes = from_file.log_cap_bytes;
      config.retention_max_age_days = from_file.retention_max_age_days;
      config.retention_max_total_bytes = from_file.retention_max_total_bytes;
      config.retention_interval_s = from_file.retention_interval_s;
      config.outputs = from_file.outputs;
      config.snapshots = from_file.snapshots;
    }
    return serve(config);
  } catch (const std::exception& e) {
    spdlog::critical("capsuled: {}", e.what());
    return 1;
  }
}

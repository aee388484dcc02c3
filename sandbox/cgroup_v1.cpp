// cgroup v1 back end: one directory <hierarchy>/<parent>/<name> in each of the memory, pids, cpu, cpuacct and
// freezer hierarchies (found in /proc/self/mountinfo, so co-mounted "cpu,cpuacct" hierarchies work too), and in
// cpuset where it is mounted, so the box's cgroup view holds the cpuset that runtimes such as the JVM require.
//
// Swap: memory.memsw.limit_in_bytes is set to the memory limit. Without swap accounting (swapaccount=0 or no
// CONFIG_MEMCG_SWAP) that file is missing; memory.swappiness is then set to 0 and the limit binds RAM only.
// kill_all freezes the group first, so nothing can fork between reading cgroup.procs and the SIGKILLs.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <set>

#include "sandbox/cgroup_fs.h"
#include "sandbox/error.h"

namespace capsule::sandbox {
namespace {

constexpr std::uint64_t kCfsPeriodUs = 100'000;
const std::vector<std::string> kControllers{"memory", "pids", "cpu", "cpuacct", "freezer"};
// An exec's leaf: what is counted or killed per exec (peak memory and OOM kills, CPU time, its process tree).
// pids and cpu stay at the box, whose pids.max and CFS quota the exec then finds in its own cgroup, where a
// runtime reads them (the JVM sizes its threads from cpu.cfs_quota_us there; a leaf of its own showed -1).
// Where cpu is co-mounted with cpuacct the leaf is in both, as before.
const std::vector<std::string> kLeafControllers{"memory", "cpuacct", "freezer"};
// Where it is mounted, the box (not its exec leaves) also gets a directory here, inheriting its parent's cpus.
const std::string kOptionalController = "cpuset";
// The hierarchies a box's view mounts (cgroup.h CgroupViewMount): what the JVM and tools read limits from.
const std::vector<std::string> kViewControllers{"memory", "pids", "cpu", "cpuacct", "cpuset"};

// Where each controller's directory for one cgroup lives; co-mounted controllers share one directory.
struct Layout {
  std::map<std::string, std::string> dir_of;  // controller -> directory
  std::vector<std::string> dirs;              // distinct directories, in kControllers order

  static Layout under(const std::map<std::string, std::string>& mounts, const std::string& relative) {
    Layout layout;
    for (const std::string& controller : kControllers) layout.add(controller, join_path(mounts.at(controller), relative));
    if (auto cpuset = mounts.find(kOptionalController); cpuset != mounts.end())
      layout.add(kOptionalController, join_path(cpuset->second, relative));
    return layout;
  }
  void add(const std::string& controller, const std::string& dir) {
    dir_of[controller] = dir;
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  std::string file(const std::string& controller, const std::string& name) const {
    return join_path(dir_of.at(controller), name);
  }
  // An exec's leaf: in kLeafControllers' hierarchies only (a cpuset leaf would need its cpus and mems set).
  Layout child(const std::string& name) const {
    Layout layout;
    for (const std::string& controller : kLeafControllers) {
      layout.add(controller, join_path(dir_of.at(controller), name));
    }
    return layout;
  }
};

class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(std::shared_ptr<CgroupFs> fs, std::string name, Layout layout, std::chrono::milliseconds timeout)
      : fs_(std::move(fs)), name_(std::move(name)), layout_(std::move(layout)), timeout_(timeout) {}
  // Also the rollback of a failed create(). Errors cannot leave a destructor; call remove() to see them.
  ~CgroupV1() override {
    try {
      remove();
    } catch (...) {  // NOLINT(bugprone-empty-catch): nowhere to report from here
    }
  }

  const std::string& name() const override { return name_; }

  void add_process(pid_t pid) override {
    for (const std::string& dir : layout_.dirs) fs_->write(join_path(dir, "cgroup.procs"), std::to_string(pid));
  }

  // The union over hierarchies: a failed add_process() may have left a process in some of them only.
  std::vector<pid_t> processes() const override {
    if (removed_) return {};
    std::set<pid_t> pids;
    for (const std::string& dir : layout_.dirs)
      for (pid_t pid : subtree_pids(*fs_, dir)) pids.insert(pid);
    return {pids.begin(), pids.end()};
  }

  void signal_all(int signo) override {
    for (pid_t pid : processes()) fs_->signal(pid, signo);
  }

  void kill_all() override {
    if (removed_) return;
    std::vector<std::string> present;
    for (const std::string& dir : layout_.dirs)
      if (fs_->exists(dir)) present.push_back(dir);
    if (present.empty()) return;
    if (processes().empty()) return;  // freezing costs milliseconds even for an empty group
    const auto deadline = Clock::now() + timeout_;
    const std::string state = layout_.file("freezer", "freezer.state");
    const bool can_freeze = fs_->exists(state);
    // Frozen tasks keep a pending SIGKILL until thawed, so: freeze, kill everything, thaw.
    if (can_freeze) freeze_until(state, Clock::now() + timeout_ / 4);
    for (pid_t pid : processes()) fs_->signal(pid, SIGKILL);
    if (can_freeze) fs_->write(state, "THAWED");
    wait_until_empty(*fs_, present, deadline, true);
  }

  CgroupUsage usage() const override {
    CgroupUsage usage;
    const std::string user = layout_.file("cpuacct", "cpuacct.usage_user");
    const std::string sys = layout_.file("cpuacct", "cpuacct.usage_sys");
    if (fs_->exists(user) && fs_->exists(sys)) {
      usage.cpu_user_ns = parse_number(fs_->read(user), user);
      usage.cpu_sys_ns = parse_number(fs_->read(sys), sys);
    } else {  // before 4.7: cpuacct.stat in USER_HZ ticks
      const std::string stat_file = layout_.file("cpuacct", "cpuacct.stat");
      const std::string stat = fs_->read(stat_file);
      const auto ns_per_tick = static_cast<std::uint64_t>(1'000'000'000 / ::sysconf(_SC_CLK_TCK));
      usage.cpu_user_ns = keyed_value(stat, "user").value_or(0) * ns_per_tick;
      usage.cpu_sys_ns = keyed_value(stat, "system").value_or(0) * ns_per_tick;
    }
    const std::string peak = layout_.file("memory", "memory.max_usage_in_bytes");
    usage.peak_memory_bytes = parse_number(fs_->read(peak), peak);
    usage.oom_kills = oom_kills();
    return usage;
  }

  // "oom_kill N" exists since 4.13.
  std::uint64_t oom_kills() const override {
    return keyed_value(fs_->read(layout_.file("memory", "memory.oom_control")), "oom_kill").value_or(0);
  }

  void remove() override {
    if (removed_) return;
    if (!remove_if_empty(*fs_, layout_.dirs)) {
      kill_all();
      const auto deadline = Clock::now() + timeout_;
      for (const std::string& dir : layout_.dirs) remove_tree(*fs_, dir, deadline);
    }
    removed_ = true;
  }

  std::unique_ptr<Cgroup> create_child(const std::string& name) override {
    check_cgroup_name(name, "child cgroup");
    Layout child = layout_.child(name);
    std::vector<std::string> made;
    for (const std::string& dir : child.dirs) {
      if (int err = fs_->make_dir(dir); err != 0) {
        for (auto it = made.rbegin(); it != made.rend(); ++it) (void)fs_->remove_dir(*it);
        errno = err;
        throw_errno("cgroup", dir, "creating a child cgroup");
      }
      made.push_back(dir);
    }
    return std::make_unique<CgroupV1>(fs_, join_path(name_, name), std::move(child), timeout_);
  }

  std::string init_leaf_procs_file() const override { return {}; }
  void hand_limits_to_children() override {}

  std::vector<std::string> procs_files() const override {
    std::vector<std::string> files;
    for (const std::string& dir : layout_.dirs) files.push_back(join_path(dir, "cgroup.procs"));
    return files;
  }

  void freeze(bool frozen) override {
    const std::string state = layout_.file("freezer", "freezer.state");
    if (frozen) {
      freeze_until(state, Clock::now() + timeout_);
      if (split_words(fs_->read(state)) != std::vector<std::string>{"FROZEN"}) {
        fs_->write(state, "THAWED");
        throw_error("cgroup", state, "the group did not freeze in time");
      }
    } else {
      fs_->write(state, "THAWED");
    }
  }

 private:
  // Best effort within the deadline: a group stuck in FREEZING is killed anyway (and re-killed while polling).
  void freeze_until(const std::string& state, Clock::time_point deadline) {
    fs_->write(state, "FROZEN");
    for (int attempt = 0; Clock::now() < deadline; ++attempt) {
      if (split_words(fs_->read(state)) == std::vector<std::string>{"FROZEN"}) return;
      poll_pause(attempt);
    }
  }

  std::shared_ptr<CgroupFs> fs_;
  std::string name_;
  Layout layout_;
  std::chrono::milliseconds timeout_;
  bool removed_ = false;
};

class CgroupV1Manager final : public CgroupManager {
 public:
  CgroupV1Manager(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs) : fs_(std::move(fs)), config_(config) {
    check_cgroup_parent(config.parent);
    mounts_ = parse_v1_mounts(fs_->read(kMountInfoPath), config.mount_root);
    for (const std::string& controller : kControllers)
      if (!mounts_.count(controller))
        throw_error("cgroup", join_path(config.mount_root, controller),
                    "no cgroup v1 hierarchy with the " + controller + " controller is mounted under " +
                        config.mount_root);
  }

  int version() const override { return 1; }

  std::unique_ptr<Cgroup> create(const std::string& name, const CgroupLimits& limits) override {
    check_cgroup_name(name, "sandbox cgroup");
    check_cgroup_limits(limits);
    // The parent is made (or checked) by the first create, and again only when it has gone since (ENOENT):
    // each box spared a dozen calls under /sys/fs/cgroup. prepare_parents is idempotent, so a race is harmless.
    bool parents_prepared = !parents_ready_.load();
    if (parents_prepared) prepare_parents();
    Layout layout = Layout::under(mounts_, join_path(config_.parent, name));
    std::vector<std::string> made;
    for (std::size_t i = 0; i < layout.dirs.size(); ++i) {
      int err = fs_->make_dir(layout.dirs[i]);
      if (err == ENOENT && !parents_prepared) {
        prepare_parents();
        parents_prepared = true;
        err = fs_->make_dir(layout.dirs[i]);
      }
      if (err != 0) {
        for (auto it = made.rbegin(); it != made.rend(); ++it) (void)fs_->remove_dir(*it);
        errno = err;
        throw_errno("cgroup", layout.dirs[i], "creating the sandbox cgroup");
      }
      made.push_back(layout.dirs[i]);
    }
    // From here on a throw destroys the group, which removes the directories again.
    auto group = std::make_unique<CgroupV1>(fs_, name, layout, config_.kill_timeout);
    if (auto cpuset = layout.dir_of.find(kOptionalController); cpuset != layout.dir_of.end())
      inherit_cpuset(parents_of(cpuset->second), cpuset->second);
    if (limits.memory_bytes > 0) {
      const std::string bytes = std::to_string(limits.memory_bytes);
      fs_->write(layout.file("memory", "memory.limit_in_bytes"), bytes);
      const std::string memsw = layout.file("memory", "memory.memsw.limit_in_bytes");
      if (fs_->exists(memsw))
        fs_->write(memsw, bytes);
      else
        fs_->write(layout.file("memory", "memory.swappiness"), "0");
    }
    if (limits.pids > 0) fs_->write(layout.file("pids", "pids.max"), std::to_string(limits.pids));
    if (limits.cpus > 0) {
      const auto quota = std::llround(limits.cpus * kCfsPeriodUs);
      fs_->write(layout.file("cpu", "cpu.cfs_period_us"), std::to_string(kCfsPeriodUs));
      fs_->write(layout.file("cpu", "cpu.cfs_quota_us"), std::to_string(quota));
    }
    return group;
  }

  // Sandbox cgroups are named the same in every hierarchy; memory is the one they always have.
  std::vector<std::string> list() const override {
    return fs_->list_dirs(join_path(mounts_.at("memory"), config_.parent));
  }

  // Succeeds when the group is left in any hierarchy, so a half-removed group can still be cleaned up.
  std::unique_ptr<Cgroup> open(const std::string& name) override {
    check_cgroup_name(name, "sandbox cgroup");
    Layout layout = Layout::under(mounts_, join_path(config_.parent, name));
    if (std::none_of(layout.dirs.begin(), layout.dirs.end(), [&](const std::string& d) { return fs_->exists(d); })) {
      errno = ENOENT;
      throw_errno("cgroup", layout.dir_of.at("memory"), "opening a sandbox cgroup");
    }
    return std::make_unique<CgroupV1>(fs_, name, std::move(layout), config_.kill_timeout);
  }

  void remove_parent() override {
    for (const std::string& dir : Layout::under(mounts_, config_.parent).dirs) (void)fs_->remove_dir(dir);
  }

  // One mount per hierarchy, named like the host's mount point, with its co-mounted controllers as aliases.
  std::vector<CgroupViewMount> view_mounts() const override {
    std::vector<CgroupViewMount> views;
    for (const std::string& controller : kViewControllers) {
      auto found = mounts_.find(controller);
      if (found == mounts_.end()) continue;
      const std::string& mount_point = found->second;
      const std::string name = mount_point.substr(mount_point.rfind('/') + 1);
      if (std::any_of(views.begin(), views.end(), [&](const CgroupViewMount& v) { return v.name == name; })) continue;
      CgroupViewMount view{"cgroup", "", name, {}};
      for (const auto& [other, other_mount] : mounts_) {
        if (other_mount != mount_point) continue;
        view.options += (view.options.empty() ? "" : ",") + other;
        if (other != name) view.aliases.push_back(other);
      }
      views.push_back(std::move(view));
    }
    return views;
  }

 private:
  static std::string parents_of(const std::string& dir) { return dir.substr(0, dir.rfind('/')); }

  void prepare_parents() {
    for (const std::string& mount : Layout::under(mounts_, "").dirs) prepare_parent(mount);
    parents_ready_ = true;
  }

  // mkdir -p <mount>/<parent>, giving each new level of a cpuset hierarchy its parent's cpus and mems, and
  // the parent (its last level) its cpu.shares in the cpu hierarchy.
  void prepare_parent(const std::string& mount) {
    auto cpuset = mounts_.find(kOptionalController);
    const bool is_cpuset = cpuset != mounts_.end() && cpuset->second == mount;
    std::string dir = mount;
    for (const std::string& part : split_path(config_.parent)) {
      const std::string child = join_path(dir, part);
      ensure_dir(*fs_, child);
      if (is_cpuset) inherit_cpuset(dir, child);
      dir = child;
    }
    if (config_.parent_cpu_weight > 0 && mount == mounts_.at("cpu"))
      fs_->write(join_path(dir, "cpu.shares"), std::to_string(cpu_shares_for(config_.parent_cpu_weight)));
  }

  // 1024 shares per default process, within the kernel's 2..262144.
  static std::uint64_t cpu_shares_for(std::uint64_t processes) {
    constexpr std::uint64_t kDefault = 1024, kMin = 2, kMax = 262144;
    return std::clamp(processes > kMax / kDefault ? kMax : processes * kDefault, kMin, kMax);
  }

  // A new cpuset cgroup starts with empty cpus/mems and refuses tasks until they are set. Only the cpuset
  // hierarchy has these files: each box's create would otherwise look for them in every hierarchy.
  void inherit_cpuset(const std::string& parent, const std::string& dir) {
    for (const char* name : {"cpuset.cpus", "cpuset.mems"}) {
      const std::string file = join_path(dir, name);
      if (!fs_->exists(file) || !split_words(fs_->read(file)).empty()) continue;
      fs_->write(file, fs_->read(join_path(parent, name)));
    }
  }

  std::shared_ptr<CgroupFs> fs_;
  CgroupConfig config_;
  std::map<std::string, std::string> mounts_;
  std::atomic<bool> parents_ready_{false};
};

}  // namespace

std::unique_ptr<CgroupManager> make_cgroup_v1(const CgroupConfig& config, std::shared_ptr<CgroupFs> fs) {
  return std::make_unique<CgroupV1Manager>(config, std::move(fs));
}

std::unique_ptr<CgroupManager> make_cgroup_v1(const CgroupConfig& config) {
  return make_cgroup_v1(config, host_cgroup_fs());
}

}  // namespace capsule::sandbox
